//! Nested calls pass the same approval gate as direct ones, and the time an approval takes is not the script's.

use super::{Around, Env, failed, gate, ok, run_with};
use futures_util::future::BoxFuture;
use minibot_agent::{APPROVAL_DENIED_CODE, ApprovalDecision, ApprovalPrompt, ApprovalRequest, Approver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A user who answers every question the same way after `delay`, remembering what was asked.
struct User {
    answer: ApprovalDecision,
    delay: Duration,
    asked: Mutex<Vec<String>>,
}

impl User {
    fn new(answer: ApprovalDecision, delay: Duration) -> Arc<Self> {
        Arc::new(Self { answer, delay, asked: Mutex::new(Vec::new()) })
    }

    fn approver(self: &Arc<Self>) -> Option<Approver> {
        Some(Approver::new(self.clone(), Duration::from_secs(30)))
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl ApprovalPrompt for User {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        self.asked.lock().unwrap().push(format!("{}: {}", request.tool, request.detail));
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.answer.clone()
        })
    }
}

fn around(user: &Arc<User>) -> Around {
    Around { gate: Some(gate(&["bash"])), approver: user.approver(), ..Around::default() }
}

#[tokio::test]
async fn an_approved_nested_call_runs() {
    let env = Env::new("");
    let user = User::new(ApprovalDecision::Approved, Duration::ZERO);
    let turn = run_with(&env, "r = await tools.bash(command='echo approved')\nr['stdout']", around(&user)).await;
    assert_eq!(ok(&turn), "approved\n");
    assert_eq!(user.asked(), ["bash: - command: echo approved"]);
}

#[tokio::test]
async fn a_denied_nested_call_raises_permission_error() {
    let env = Env::new("");
    let marker = env._dir.path().join("ran");
    let user = User::new(ApprovalDecision::Denied, Duration::ZERO);
    let code = format!(
        "try:\n    await tools.bash(command='touch {}')\nexcept PermissionError as e:\n    print('denied:', e)\n'went on'",
        marker.display()
    );
    let turn = run_with(&env, &code, around(&user)).await;
    assert_eq!(ok(&turn), "went on");
    assert!(turn.result["output"].as_str().unwrap().starts_with("denied: The user did not approve bash."));
    assert!(!marker.exists());
    assert!(turn.nested_started().is_empty(), "a call that was not approved never started");

    // Uncaught, the script's result is the denial a direct call gets.
    let turn = run_with(&env, &format!("await tools.bash(command='touch {}')", marker.display()), around(&user)).await;
    assert_eq!(turn.result["ok"], false);
    assert_eq!(turn.result["error_code"], APPROVAL_DENIED_CODE, "{}", turn.result);
    assert!(turn.result["error"].as_str().unwrap().starts_with("The user did not approve bash."));
    assert!(!marker.exists());

    // Wrapped in another exception, it is an ordinary script error.
    let code = "try:\n    await tools.bash(command='true')\nexcept PermissionError as e:\n    raise RuntimeError('no')";
    let turn = run_with(&env, code, around(&user)).await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert_eq!(turn.result["tool_errors"][0]["error_code"], APPROVAL_DENIED_CODE);
}

#[tokio::test]
async fn the_script_clock_stops_while_the_owner_decides() {
    let env = Env::new("");
    // The owner takes 1.5 s; the script may take 1 s, of which the calls themselves use little.
    let user = User::new(ApprovalDecision::Approved, Duration::from_millis(1500));
    let around = Around { timeout_seconds: Some(1.0), ..around(&user) };
    let turn = run_with(&env, "r = await tools.bash(command='echo late')\nr['stdout']", around).await;
    assert_eq!(ok(&turn), "late\n");
}

/// Red-team report (#26, isolation round): a script that caught each denial asked the user fifty times; a
/// direct response stops asking after the first no.
#[tokio::test]
async fn after_a_denial_a_script_asks_no_more() {
    let env = Env::new("");
    let user = User::new(ApprovalDecision::Denied, Duration::ZERO);
    let code = "refused = 0\nfor i in range(5):\n    try:\n        await tools.bash(command='echo ' + str(i))\n    \
                except PermissionError:\n        refused += 1\nrefused";
    let turn = run_with(&env, code, around(&user)).await;
    assert_eq!(ok(&turn), 5);
    assert_eq!(user.asked().len(), 1, "{:?}", user.asked());
    assert!(turn.nested_started().is_empty());
}

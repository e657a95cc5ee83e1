//! How scripts fail: each error code, and the limits that stop a script.

use super::{Around, Env, failed, ok, run, run_with};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_syntax_error_is_reported_with_its_place() {
    let env = Env::new("");
    let turn = run(&env, "def f(:\n    pass").await;
    assert_eq!(failed(&turn), "codemode:syntax_error");
    let error = turn.result["error"].as_str().unwrap();
    assert!(error.contains("line 1") && error.contains("SyntaxError"), "{error}");
}

#[tokio::test]
async fn an_uncaught_exception_keeps_the_output_before_it() {
    let env = Env::new("");
    let turn = run(&env, "print('before')\nraise KeyError('k')").await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert_eq!(turn.result["output"], "before\n");
    assert!(turn.result["error"].as_str().unwrap().contains("KeyError"), "{}", turn.result);
    assert!(turn.result.get("hint").is_none());

    let turn = run(&env, "await bash(command='ls')").await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert!(turn.result["hint"].as_str().unwrap().contains("`bash`"), "{}", turn.result);
    let turn = run(&env, "await tools.no_such_tool()").await;
    assert!(turn.result["hint"].as_str().unwrap().contains("`no_such_tool`"), "{}", turn.result);
}

#[tokio::test]
async fn an_endless_loop_ends_at_the_time_limit() {
    let env = Env::new("");
    let around = Around { timeout_seconds: Some(1.0), ..Around::default() };
    let started = Instant::now();
    let turn = run_with(&env, "print('start')\nwhile True:\n    pass", around).await;
    assert_eq!(failed(&turn), "codemode:timeout");
    assert_eq!(turn.result["output"], "start\n");
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(4), "{took:?}");
}

#[tokio::test]
async fn the_time_limit_counts_tool_calls_and_cancels_the_running_ones() {
    let env = Env::new("[tools.codemode]\nenabled = true\ntimeout_seconds = 1\n");
    let marker = env._dir.path().join("still-running");
    let code = format!(
        "import asyncio\nawait asyncio.gather(tools.wait(milliseconds=400), \
         tools.bash(command='sleep 3; touch {}'))",
        marker.display()
    );
    let started = Instant::now();
    let turn = run(&env, &code).await;
    assert_eq!(failed(&turn), "codemode:timeout");
    assert!(started.elapsed() < Duration::from_millis(2500), "{:?}", started.elapsed());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!marker.exists(), "the cancelled bash call went on");

    // The computing after a call gets only what is left.
    let started = Instant::now();
    let turn = run(&env, "await tools.wait(milliseconds=700)\nwhile True:\n    pass").await;
    assert_eq!(failed(&turn), "codemode:timeout");
    assert!(started.elapsed() < Duration::from_millis(1900), "{:?}", started.elapsed());
}

#[tokio::test]
async fn memory_bombs_are_stopped() {
    let env = Env::new("[tools.codemode]\nenabled = true\nmax_memory_mb = 16\n");
    let turn = run(&env, "x = 'a' * (10 ** 9)\nlen(x)").await;
    assert_eq!(failed(&turn), "codemode:memory_limit", "{}", turn.result);
    // Memory grown step by step is noticed between steps: the script stops itself and keeps its output.
    let turn = run(&env, "print('growing')\nx = []\nwhile True:\n    x.append('a' * 1000)").await;
    assert_eq!(failed(&turn), "codemode:memory_limit", "{}", turn.result);
    assert_eq!(turn.result["output"], "growing\n", "{}", turn.result);
    // A script that stays within the limit runs, also after those.
    let turn = run(&env, "x = ['a' * 1000 for _ in range(1000)]\nlen(x)").await;
    assert_eq!(ok(&turn), 1000);
}

#[tokio::test]
async fn the_call_past_the_cap_raises_a_catchable_error() {
    let env = Env::new("[tools.codemode]\nenabled = true\nmax_tool_calls = 3\n");
    let code = "done = 0\nfor i in range(5):\n    try:\n        await tools.wait(milliseconds=1)\n        done += 1\n    \
                except ValueError as e:\n        print(str(e)[:24])\ndone";
    let turn = run(&env, code).await;
    assert_eq!(ok(&turn), 3);
    assert_eq!(turn.result["output"], "codemode:tool_call_limit\ncodemode:tool_call_limit\n");
    assert_eq!(turn.nested_started().len(), 3);

    let turn = run(&env, "for i in range(4):\n    await tools.wait(milliseconds=1)").await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert_eq!(turn.result["tool_errors"], json!([{"tool": "wait", "error_code": "codemode:tool_call_limit"}]));
}

#[tokio::test]
async fn output_and_result_keep_their_start_and_end() {
    let env = Env::new("[tools.codemode]\nenabled = true\nmax_output_chars = 100\n");
    let turn = run(&env, "for i in range(1000):\n    print(i)\n'y' * 500").await;
    let output = turn.result["output"].as_str().unwrap();
    assert!(output.starts_with("0\n1\n2\n"), "{output}");
    assert!(output.contains("characters omitted]"), "{output}");
    assert!(output.ends_with("998\n999\n"), "{output}");
    let result = ok(&turn).as_str().unwrap();
    assert!(result.starts_with("\"yyy") && result.ends_with("yyy\""), "{result}");
    assert!(result.contains("[402 characters omitted]"), "{result}");
}

#[tokio::test]
async fn failed_nested_calls_are_listed() {
    let env = Env::new("");
    let code =
        "try:\n    await tools.bash(command='true', cwd='/definitely/not/here')\nexcept RuntimeError:\n    pass\n1 / 0";
    let turn = run(&env, code).await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert_eq!(turn.result["tool_errors"], json!([{"tool": "bash", "error_code": "invalid_cwd"}]));
}

/// Red-team report (#26): 200,000 refused calls once made a 15 MB `tool_errors` list for the model and as many
/// warning lines, rotating the logs away.
#[tokio::test]
async fn a_loop_of_refused_calls_lists_twenty_and_counts_the_rest() {
    let env = Env::new("[tools.codemode]\nenabled = true\nmax_tool_calls = 1\n");
    let code = "for i in range(500):\n    try:\n        await tools.wait(milliseconds=1)\n    except ValueError:\n        \
                pass\nraise KeyError('end')";
    let turn = run(&env, code).await;
    assert_eq!(failed(&turn), "codemode:script_error");
    assert_eq!(turn.result["tool_errors"].as_array().unwrap().len(), 20, "{}", turn.result);
    assert_eq!(turn.result["tool_errors_omitted"], 479, "{}", turn.result);
}

/// Red-team report (#26, isolation round): one script started fifty calls at once (fifty sandboxes). At most
/// eight run together; the others start as those end, and every one runs.
#[tokio::test]
async fn at_most_eight_nested_calls_run_at_once() {
    let env = Env::new("");
    let code = "import asyncio\nr = await asyncio.gather(*[tools.wait(milliseconds=150) for _ in range(12)])\nlen(r)";
    let turn = run(&env, code).await;
    assert_eq!(ok(&turn), 12);
    let (mut running, mut most) = (0usize, 0usize);
    for event in &turn.events {
        match event {
            minibot_agent::AgentEvent::ToolStarted { parent_call_id: Some(_), .. } => running += 1,
            minibot_agent::AgentEvent::ToolFinished { parent_call_id: Some(_), .. } => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, 8, "{:?}", turn.events);
}

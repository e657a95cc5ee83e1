//! Tasks of managed (model-authored) specialists carry their definition. The worker runs the text it is given
//! only when the text is the version the task names and passes this worker's own ceiling; otherwise it refuses
//! the task without calling the model.

use super::{Setup, ending, envelope};
use minibot_protocol::{TaskEnvelope, definition_hash};
use minibot_queue::TaskQueue;
use minibot_test_support::{Reply, Script};

const CEILING: &str = "[orchestration.agent_management]\nwrite = true\ntools_allow = [\"current_datetime\"]\n";

const NOTES: &str = "---\nname: note_keeper\ndescription: keeps notes\ntools_allow:\n  - current_datetime\n---\nYou are the NOTE KEEPER.\n";

fn managed_task(id: &str, prompt: &str, text: &str, hash_of: &str) -> TaskEnvelope {
    let mut task = envelope(id, prompt, 60);
    task.agent_name = Some("note_keeper".into());
    task.agent_definition = Some(text.into());
    task.agent_hash = Some(definition_hash(hash_of.as_bytes()));
    task
}

fn system_prompts(setup: &Setup) -> Vec<String> {
    setup.llm.requests().iter().filter_map(|r| r["messages"][0]["content"].as_str().map(String::from)).collect()
}

#[tokio::test]
async fn a_carried_definition_runs_and_a_changed_one_is_refused() {
    let scripts = vec![
        Script::new("take a note", vec![Reply::text("noted")]),
        Script::new("tampered note", vec![Reply::text("the tampered task ran")]),
    ];
    let setup = Setup::start(scripts, CEILING).await;
    let worker = setup.serve(|queue| queue);

    setup.orchestrator.publish(&managed_task("ok", "take a note", NOTES, NOTES)).await.unwrap();
    let done = setup.endings(1).await;
    assert_eq!(ending(&done["ok"]), ("completed".to_string(), Some("noted".to_string())));
    let prompts = system_prompts(&setup);
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].starts_with("You are the NOTE KEEPER."), "the carried prompt: {}", prompts[0]);

    // The text was changed on its way; the hash is still the original's.
    let tampered = NOTES.replace("NOTE KEEPER", "ROOT SHELL");
    setup.orchestrator.publish(&managed_task("bad", "tampered note", &tampered, NOTES)).await.unwrap();
    let refused = setup.endings(1).await;
    let (_, error) = ending(&refused["bad"]);
    let error = error.unwrap_or_default();
    assert!(error.contains("refused") && error.contains("changed after it was sent"), "{error}");
    assert_eq!(setup.llm.requests().len(), 1, "the model was not called for the tampered task");

    // No hash at all is no better.
    let mut unversioned = managed_task("none", "tampered note", NOTES, NOTES);
    unversioned.agent_hash = None;
    setup.orchestrator.publish(&unversioned).await.unwrap();
    let (_, error) = ending(&setup.endings(1).await["none"]);
    assert!(error.unwrap_or_default().contains("without its version"));
    worker.abort();
    setup.close().await;
}

#[tokio::test]
async fn the_workers_own_ceiling_decides() {
    let scripts = vec![Script::new("use bash", vec![Reply::text("ran with bash")])];
    // This worker's owner allows no tools to managed agents at all.
    let setup = Setup::start(scripts, "[orchestration.agent_management]\nwrite = true\n").await;
    let worker = setup.serve(|queue| queue);
    setup.orchestrator.publish(&managed_task("t", "use bash", NOTES, NOTES)).await.unwrap();
    let (_, error) = ending(&setup.endings(1).await["t"]);
    let error = error.unwrap_or_default();
    assert!(error.contains("managed specialist `note_keeper`") && error.contains("current_datetime"), "{error}");
    assert!(setup.llm.requests().is_empty());
    worker.abort();
    setup.close().await;

    let scripts = vec![Script::new("use bash", vec![Reply::text("ran")])];
    let setup = Setup::start(scripts, "").await;
    let worker = setup.serve(|queue| queue);
    setup.orchestrator.publish(&managed_task("t", "use bash", NOTES, NOTES)).await.unwrap();
    let (_, error) = ending(&setup.endings(1).await["t"]);
    assert!(error.unwrap_or_default().contains("agent management is off"));
    assert!(setup.llm.requests().is_empty());
    worker.abort();
    setup.close().await;
}

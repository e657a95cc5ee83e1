//! What scripts can do: call tools (concurrently when gathered), use the helpers, and nothing else.

use super::{Around, Env, ok, run, run_with};
use minibot_agent::{AgentEvent, Limits};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_script_calls_three_tools_two_of_them_at_once() {
    let env = Env::new("");
    let code = "import asyncio\n\
                now = await tools.current_datetime()\n\
                a, b = await asyncio.gather(tools.wait(milliseconds=300), tools.wait(milliseconds=300))\n\
                print('slept', a['slept_ms'] + b['slept_ms'])\n\
                {'now': now['timestamp'][:4], 'both': [a['ok'], b['ok']]}";
    let turn = run(&env, code).await;
    let result = ok(&turn);
    assert_eq!(result["both"], json!([true, true]));
    assert_eq!(result["now"].as_str().unwrap().len(), 4);
    assert_eq!(turn.result["output"], "slept 600\n");

    // The two waits overlapped: the whole script took less than their sum.
    let script = turn
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolFinished { name, duration, parent_call_id: None, .. } if name == "run_tools_script" => {
                Some(*duration)
            }
            _ => None,
        })
        .unwrap();
    assert!(script >= Duration::from_millis(300), "{script:?}");
    assert!(script < Duration::from_millis(500), "the gathered waits ran one after the other: {script:?}");
    let order: Vec<String> = turn
        .events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolStarted { name, parent_call_id: Some(_), .. } if name == "wait" => Some("start".into()),
            AgentEvent::ToolFinished { name, parent_call_id: Some(_), .. } if name == "wait" => Some("end".into()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start", "start", "end", "end"]);
}

#[tokio::test]
async fn nested_calls_report_their_own_events_under_the_script_call() {
    let env = Env::new("");
    let turn = run(&env, "await tools.current_datetime()\nawait tools.wait(milliseconds=1)").await;
    ok(&turn);
    let parent = turn
        .events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ToolStarted { call_id, name, parent_call_id: None } if name == "run_tools_script" => {
                Some(call_id.clone())
            }
            _ => None,
        })
        .expect("the script call itself has no parent");
    let nested = turn.nested_started();
    assert_eq!(nested.iter().map(|(_, name, _)| name.as_str()).collect::<Vec<_>>(), ["current_datetime", "wait"]);
    assert!(nested.iter().all(|(_, _, p)| *p == parent), "{nested:?}");
    let finished = turn
        .events
        .iter()
        .filter(
            |event| matches!(event, AgentEvent::ToolFinished { parent_call_id: Some(p), ok: true, .. } if *p == parent),
        )
        .count();
    assert_eq!(finished, 2);
    // Only the model's own call is in the outcome.
    assert_eq!(turn.outcome.tools_used, ["run_tools_script"]);
}

#[tokio::test]
async fn nested_calls_do_not_count_against_the_turns_tool_call_cap() {
    let env = Env::new("");
    let around = Around {
        limits: Limits { max_steps: Some(5), max_tool_calls: Some(1), timeout: Duration::from_secs(60) },
        ..Around::default()
    };
    let code = "for i in range(5):\n    await tools.wait(milliseconds=1)\n'five'";
    let turn = run_with(&env, code, around).await;
    assert_eq!(ok(&turn), "five");
    assert_eq!(turn.outcome.answer, "done");
    assert_eq!(turn.outcome.tool_calls, 1);
}

#[tokio::test]
async fn the_script_tool_replaces_the_tools_it_can_call() {
    let env = Env::new("[tasks]\nenabled = false\n[tools.codemode]\nenabled = true\nexclude = [\"wai*\"]\n");
    let names = env.tools.names();
    assert!(names.contains(&"run_tools_script".to_string()));
    assert!(!names.contains(&"bash".to_string()), "bash is called from scripts now: {names:?}");
    assert!(names.contains(&"wait".to_string()), "an excluded tool stays direct: {names:?}");
    let description = env.tools.get("run_tools_script").unwrap().spec().description;
    assert!(description.contains("- tools.bash("), "{description}");
    assert!(description.contains("- tools.current_datetime(format: str | None = None)"), "{description}");
    assert!(!description.contains("tools.wait("), "{description}");

    let turn = run(&env, "await tools.wait(milliseconds=1)").await;
    assert_eq!(super::failed(&turn), "codemode:script_error");
    assert!(turn.result["hint"].as_str().unwrap().contains("`wait`"), "{}", turn.result);
}

#[tokio::test]
async fn helpers_list_describe_and_cut() {
    let env = Env::new("");
    let code = "names = [t['name'] for t in list_tools('date')]\n\
                d = describe_tool('current_datetime')\n\
                {'names': names, 'sig': d['signature'], 'cut': text('x' * 50, limit=10), \
                 'lines': text({'a': [1, 2]}, limit=2, unit='lines')}";
    let turn = run(&env, code).await;
    let result = ok(&turn);
    assert_eq!(result["names"], json!(["current_datetime"]));
    assert_eq!(result["sig"], "current_datetime(format: str | None = None)");
    assert_eq!(result["cut"], "xxxxxxxxxx… [40 more characters]");
    assert_eq!(result["lines"], "{\n  \"a\": [\n… [4 more lines]");

    let turn = run(&env, "describe_tool('nope')").await;
    assert_eq!(super::failed(&turn), "codemode:script_error");
    assert!(turn.result["error"].as_str().unwrap().contains("ValueError: no tool named `nope`"), "{}", turn.result);
}

#[tokio::test]
async fn a_script_reaches_no_file_environment_or_process_of_its_own() {
    let env = Env::new("");
    let code = [
        "out = []",
        "for attempt in [lambda: open('/etc/hostname').read(), lambda: __import__('os')]:",
        "    try:",
        "        out.append(attempt())",
        "    except Exception as e:",
        "        out.append(type(e).__name__)",
        "import os",
        "try:",
        "    out.append(os.getenv('HOME'))",
        "except PermissionError as e:",
        "    out.append(str(e))",
        "from pathlib import Path",
        "try:",
        "    out.append(Path('/etc/hostname').read_text())",
        "except PermissionError:",
        "    out.append('no path')",
        "out",
    ]
    .join("\n");
    let turn = run(&env, &code).await;
    let result = ok(&turn).as_array().unwrap().clone();
    assert_eq!(result[0], "PermissionError", "{result:?}");
    assert_eq!(result[1], "NameError", "{result:?}");
    assert!(result[2].as_str().unwrap().starts_with("scripts have no file system"), "{result:?}");
    assert_eq!(result[3], "no path");
    for module in ["subprocess", "socket", "ctypes"] {
        let turn = run(&env, &format!("import {module}")).await;
        assert_eq!(super::failed(&turn), "codemode:script_error", "{module}: {}", turn.result);
    }
}

#[tokio::test]
async fn nested_results_arrive_whole_although_direct_ones_spill() {
    let env = Env::new("[tools.tool_output_spill]\nenabled = true\nspill_after_chars = 1000\n");
    let code = "r = await tools.bash(command='head -c 5000 /dev/zero | tr \"\\\\0\" a')\nlen(r['stdout'])";
    let turn = run(&env, code).await;
    assert_eq!(ok(&turn), 5000, "{}", turn.result);
}

#[tokio::test]
async fn tool_errors_raise_and_can_be_caught() {
    let env = Env::new("");
    let code = "try:\n    await tools.wait(milliseconds=0)\nexcept ValueError as e:\n    print('caught', e)\n\
                try:\n    await tools.wait(milliseconds=1, nope=2)\nexcept ValueError as e:\n    print('caught too')\n\
                try:\n    await tools.wait(1)\nexcept ValueError as e:\n    print(e)\n'went on'";
    let turn = run(&env, code).await;
    assert_eq!(ok(&turn), "went on");
    let output = turn.result["output"].as_str().unwrap();
    assert!(
        output.starts_with("caught wait failed (invalid_arguments): milliseconds must be at least 1\n"),
        "{output}"
    );
    assert!(output.contains("caught too\n"), "{output}");
    assert!(output.contains("takes keyword arguments only"), "{output}");
}

//! Streamed answers as the user sees them: the console prints the text as the model writes it (and the answer
//! once), a pipe gets whole answers, Telegram shows a live draft edited at a bounded rate that becomes the
//! formatted answer, and `/stop` mid-stream keeps what was shown, marked as cut, on screen and in the history.
//! The scripted model sends its stream's events [`GAP`] apart.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, requests_for, stderr, stdout};
use minibot_test_support::FakeTelegram;
use minibot_test_support::fake_telegram::{Call, describe};
use serde_json::Value;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The pause between two events of the model's stream (role, three pieces of text, finish, usage, end).
const GAP: Duration = Duration::from_millis(700);
/// Streamed in three pieces: "The quick brown", " fox jumps over", " the lazy dog."
const ANSWER: &str = "The quick brown fox jumps over the lazy dog.";
const FIRST_PIECE: &str = "The quick brown";
const CUT_MARK: &str = " … [stopped]";

fn slow_model(question: &str, answer: &str) -> Script {
    Script::new(question, vec![Reply::text(answer)])
}

/// The assistant messages of the model's last request.
fn last_assistant_texts(llm: &ScriptedLlm) -> Vec<String> {
    let last = llm.requests().pop().unwrap();
    let messages = last["messages"].as_array().unwrap().clone();
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

/// A console on a terminal whose question is answered slowly, piece by piece; the question is typed. The model
/// and the home live as long as the caller keeps them.
async fn ask_to_write_slowly_in_a_terminal() -> (ScriptedLlm, Home, Terminal) {
    let llm = ScriptedLlm::start(vec![slow_model("write slowly", ANSWER)]).await;
    llm.set_stream_gap(GAP);
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("write slowly");
    (llm, home, terminal)
}

#[tokio::test]
async fn the_console_shows_the_answer_as_it_is_written_and_prints_it_once() {
    let (_llm, _home, terminal) = ask_to_write_slowly_in_a_terminal().await;
    let screen = terminal.wait_for(FIRST_PIECE).await;
    assert!(!screen.contains("lazy dog"), "the first piece showed only with the end: {screen:?}");
    terminal.wait_for(ANSWER).await;
    // Past the end of the turn: the answer that ends it does not print the text again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let screen = terminal.exit().await;
    let mut drawn = 0;
    for (at, _) in screen.match_indices(ANSWER) {
        drawn += 1;
        // Each time the whole text is on the screen it is the live row, redrawn above the status line; an answer
        // printed again would stand alone above the prompt.
        // (`/exit`, typed before the turn ended, waits under the live row.)
        let after = screen[at + ANSWER.len()..].trim_start_matches(['\r', '\n']);
        let after = after.strip_prefix("you> /exit").unwrap_or(after).trim_start_matches(['\r', '\n']);
        assert!(after.starts_with("\x1b[2m"), "printed again: {screen:?}");
    }
    assert!(drawn >= 1, "{screen:?}");
    let rows = render(&screen, 80);
    assert_eq!(rows.iter().filter(|row| row.contains(ANSWER)).count(), 1, "{rows:#?}");
}

/// What `console --once '<question>'` prints on a terminal (`script` gives the command one); it must succeed.
async fn once_on_a_terminal(home: &Home, question: &str) -> String {
    let shell = format!(
        "{} console --once '{question}' --config {}",
        minibot_e2e::binary("minibot").display(),
        home.config().display()
    );
    let mut command = minibot_e2e::in_a_terminal(&shell);
    command.stdin(Stdio::null());
    let output = minibot_e2e::run(command).await;
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

#[tokio::test]
async fn once_on_a_terminal_streams_and_a_pipe_gets_the_answer_whole() {
    let llm = ScriptedLlm::start(vec![slow_model("write slowly", ANSWER)]).await;
    llm.set_stream_gap(Duration::from_millis(300));
    let home = Home::new(&llm.base_url(), "");
    // A pipe: the answer alone, once, on its line.
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "write slowly"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), format!("{ANSWER}\n"));

    // A terminal (`script` gives the command one): the pieces replace the spinner, and the answer is not
    // printed a second time when the turn ends.
    let screen = once_on_a_terminal(&home, "write slowly").await;
    assert_eq!(screen.matches(ANSWER).count(), 1, "{screen:?}");
    let answer = screen.find(ANSWER).unwrap();
    assert!(screen[..answer].ends_with("\r\x1b[2K"), "the spinner was not cleared for the text: {screen:?}");
}

#[tokio::test]
async fn stop_mid_stream_keeps_the_shown_text_marked_as_cut_and_the_history_has_it() {
    let llm = ScriptedLlm::start(vec![
        slow_model("write slowly", ANSWER),
        Script::new("what did you say?", vec![Reply::text("Only the start.")]),
    ])
    .await;
    llm.set_stream_gap(Duration::from_millis(2000));
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("write slowly");
    terminal.wait_for(FIRST_PIECE).await;
    terminal.type_line("/stop");
    let screen = terminal.wait_for("Stopped.").await;
    let cut = format!("{FIRST_PIECE}{CUT_MARK}");
    assert!(screen.contains(&cut), "{screen:?}");
    assert!(!screen.contains("lazy dog"), "{screen:?}");
    terminal.exit().await;

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "what did you say?"])).await;
    assert_eq!(stdout(&output), "Only the start.\n", "{}", stderr(&output));
    assert_eq!(last_assistant_texts(&llm), [cut]);
}

/// The rows a terminal of `columns` columns shows after `output` (trailing blanks cut), as tall as it needs. It
/// knows the few sequences the console and its line editor write: cursor moves, erasing; colours and modes are
/// ignored. The pseudo-terminal already turned each line feed into a carriage return and a line feed.
pub(crate) fn render(output: &str, columns: usize) -> Vec<String> {
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    // The cursor sits after the last column: the next character starts a new row.
    let mut at_edge = false;
    let mut chars = output.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => row += 1,
            '\x08' => col = col.saturating_sub(1),
            '\x07' => {}
            '\x1b' => match chars.next() {
                Some('[') => {
                    let mut params = String::new();
                    let mut command = ' ';
                    for p in chars.by_ref() {
                        if ('@'..='~').contains(&p) {
                            command = p;
                            break;
                        }
                        params.push(p);
                    }
                    let n: usize =
                        params.trim_start_matches('?').split(';').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                    let by = n.max(1);
                    rows.resize_with(rows.len().max(row + 1), Vec::new);
                    match command {
                        'A' => row = row.saturating_sub(by),
                        'B' => row += by,
                        'C' => col = (col + by).min(columns - 1),
                        'D' => col = col.saturating_sub(by),
                        'G' => col = by - 1,
                        'H' => (row, col) = (0, 0),
                        'K' if n == 2 => rows[row].clear(),
                        'K' if n == 1 => rows[row].iter_mut().take(col + 1).for_each(|c| *c = ' '),
                        'K' => rows[row].truncate(col),
                        'J' if n == 2 => rows.iter_mut().for_each(Vec::clear),
                        'J' => {
                            rows[row].truncate(col);
                            rows.truncate(row + 1);
                        }
                        _ => {}
                    }
                }
                Some(']') => {
                    // An operating system command: up to BEL or ESC \.
                    while let Some(p) = chars.next() {
                        if p == '\x07' || (p == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            c => {
                if at_edge {
                    (row, col) = (row + 1, 0);
                }
                rows.resize_with(rows.len().max(row + 1), Vec::new);
                let line = &mut rows[row];
                line.resize(line.len().max(col), ' ');
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                if col + 1 < columns {
                    col += 1;
                } else {
                    at_edge = true;
                    continue;
                }
            }
        }
        at_edge = false;
        rows.resize_with(rows.len().max(row + 1), Vec::new);
    }
    rows.into_iter().map(|r| r.into_iter().collect::<String>().trim_end().to_string()).collect()
}

/// The rows of the console's screen from the first that contains `from`, without the empty rows at the end.
fn rows_from(screen: &str, from: &str) -> Vec<String> {
    let mut rows = render(screen, 80);
    let first = rows.iter().position(|r| r.contains(from)).unwrap_or_else(|| panic!("no {from:?} in {rows:#?}"));
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    rows.split_off(first)
}

/// A status row: its spinner frame, then what the turn does.
fn is_status(row: &str) -> bool {
    row.contains(" · step ") && row.ends_with('s')
}

/// Waits until the turn is over (no status row on the screen), failing after 30 s.
async fn until_idle(terminal: &Terminal) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while render(&terminal.screen(), 80).iter().any(|row| is_status(row)) {
        assert!(Instant::now() < deadline, "the turn never ended: {:#?}", render(&terminal.screen(), 80));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn the_screen_model_follows_the_line_editor() {
    let rows = render("you> ab\r\ntext\r\nstatus\x1b[1A\r\x1b[2Kover\r\nx\x1b[31my\x1b[0m\x1b[1D\x1b[K", 80);
    assert_eq!(rows, ["you> ab", "over", "x"]);
    assert_eq!(render("abcdef", 3), ["abc", "def"]);
}

/// While the text streams, the status line stays right under it and the prompt under that: each piece and each
/// tick of the status line redraw those rows instead of adding to them.
#[tokio::test]
async fn the_status_line_stays_under_the_text_as_it_streams() {
    let (_llm, _home, terminal) = ask_to_write_slowly_in_a_terminal().await;
    for piece in [FIRST_PIECE, "The quick brown fox jumps over"] {
        terminal.wait_for(piece).await;
        // A few ticks of the status line.
        tokio::time::sleep(Duration::from_millis(450)).await;
        let rows = rows_from(&terminal.screen(), "you> write slowly");
        assert_eq!(rows.len(), 4, "{rows:#?}");
        // (The next piece may have come meanwhile on a slow machine.)
        assert!(rows[1].starts_with(piece), "{rows:#?}");
        assert!(is_status(&rows[2]) && rows[2].contains("thinking · step 1"), "{rows:#?}");
        assert_eq!(rows[3], "you>", "{rows:#?}");
    }
    until_idle(&terminal).await;
    let screen = terminal.exit().await;
    let rows = rows_from(&screen, "you> write slowly");
    assert_eq!(rows, ["you> write slowly", ANSWER, "you> /exit"], "the status line stayed, or a row is empty");
}

/// Typing while the text streams keeps the typed text on the prompt; a line entered then waits under the text
/// until it is complete, and an empty one leaves nothing. No stale status line or half line stays behind.
#[tokio::test]
async fn a_line_entered_while_the_answer_streams_is_redrawn_under_it() {
    let llm = ScriptedLlm::start(vec![
        slow_model("write slowly", ANSWER),
        Script::new("and the cat", vec![Reply::text("The cat sleeps.")]),
    ])
    .await;
    llm.set_stream_gap(GAP);
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("write slowly");
    terminal.wait_for(FIRST_PIECE).await;
    terminal.type_keys("\r");
    // Apart, as a person types: keys read with the Enter before them are dropped with that line.
    tokio::time::sleep(Duration::from_millis(200)).await;
    terminal.type_keys("and the");
    tokio::time::sleep(Duration::from_millis(450)).await;
    let screen = terminal.screen();
    let rows = rows_from(&screen, "you> write slowly");
    assert_eq!(rows.len(), 4, "the empty line stayed: {rows:#?}");
    assert_eq!(rows[3], "you> and the", "the typed text is not on the prompt: {rows:#?} {screen:?}");
    terminal.type_line(" cat");
    tokio::time::sleep(Duration::from_millis(450)).await;
    let rows = rows_from(&terminal.screen(), "you> write slowly");
    if !rows.iter().any(|r| r.contains("lazy dog")) {
        // Still streaming: the line waits under the text, over the status line.
        assert_eq!(rows.len(), 5, "{rows:#?}");
        assert!(rows[1].starts_with(FIRST_PIECE), "{rows:#?}");
        assert_eq!(rows[2], "you> and the cat", "{rows:#?}");
        assert!(is_status(&rows[3]), "{rows:#?}");
        assert_eq!(rows[4], "you>", "{rows:#?}");
    }
    terminal.wait_for("The cat sleeps.").await;
    until_idle(&terminal).await;
    let screen = terminal.exit().await;
    let rows = rows_from(&screen, "you> write slowly");
    assert_eq!(rows, ["you> write slowly", ANSWER, "you> and the cat", "The cat sleeps.", "you> /exit"], "{screen:?}");
}

// ---- Telegram ----

/// The daemon against the fake Bot API; killed when dropped.
struct Daemon(Child);

impl Daemon {
    fn start(home: &Home) -> Self {
        let mut command = home.minibot(&[]);
        command.stdout(Stdio::null()).stderr(Stdio::null());
        Self(command.spawn().unwrap())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn telegram_home(llm: &ScriptedLlm, fake: &FakeTelegram) -> Home {
    let section = format!(
        "[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \"{}\"\npoll_timeout_seconds = 1\n\
         require_authorized = false\n",
        FakeTelegram::TOKEN,
        fake.base_url()
    );
    Home::new(&llm.base_url(), &section)
}

/// The text as sent, MarkdownV2 escapes removed (its markup stays).
fn visible(call: &Call) -> String {
    let text = call.text().unwrap_or_default();
    if call.parse_mode() != Some("MarkdownV2") {
        return text.to_string();
    }
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(next)) if next.is_ascii_punctuation() => {
                out.push(*next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The successful sends and edits of texts to chat 1, in order.
fn chat_calls(fake: &FakeTelegram) -> Vec<Call> {
    fake.calls()
        .into_iter()
        .filter(|c| c.ok() && c.chat_id() == Some(1) && matches!(c.method.as_str(), "sendMessage" | "editMessageText"))
        .collect()
}

async fn until(fake: &FakeTelegram, what: &str, cond: impl Fn(&[Call]) -> bool) -> Vec<Call> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let calls = chat_calls(fake);
        if cond(&calls) {
            return calls;
        }
        assert!(Instant::now() < deadline, "waiting for {what}; calls:\n{}", describe(&fake.calls()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn telegram_shows_a_draft_edited_at_most_every_second_then_the_formatted_answer() {
    let answer = "**Bold** start, then a middle part, and a _quiet_ end.";
    let llm = ScriptedLlm::start(vec![slow_model("write slowly", answer)]).await;
    llm.set_stream_gap(GAP);
    let fake = FakeTelegram::start().await;
    let home = telegram_home(&llm, &fake);
    let _daemon = Daemon::start(&home);
    let (_, asked) = fake.push_text(1, 1, "write slowly");
    // As MarkdownV2 marks it up: bold is `*…*` there.
    let shown = "*Bold* start, then a middle part, and a _quiet_ end.";
    let calls = until(&fake, "the formatted answer", |calls| {
        calls.last().is_some_and(|c| c.parse_mode() == Some("MarkdownV2") && visible(c) == shown)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls_after = chat_calls(&fake);
    assert_eq!(calls_after.len(), calls.len(), "more after the answer: {}", describe(&calls_after));

    // One message: the draft (plain, replying to the question), edited, then edited into the answer.
    let (draft, edits) = calls.split_first().unwrap();
    assert_eq!(draft.method, "sendMessage", "{}", describe(&calls));
    assert_eq!(draft.parse_mode(), None, "a draft is plain text");
    assert_eq!(draft.reply_to(), Some(asked));
    assert!(answer.starts_with(draft.text().unwrap()), "{draft:?}");
    assert!(draft.text().unwrap().len() < answer.len(), "the draft came only with the whole text: {draft:?}");
    assert!(edits.iter().all(|e| e.method == "editMessageText"), "{}", describe(&calls));
    let draft_id = draft.message_id().unwrap();
    assert!(edits.iter().all(|e| e.params["message_id"].as_i64() == Some(draft_id)));
    let (last, live_edits) = edits.split_last().unwrap();
    assert_eq!(last.parse_mode(), Some("MarkdownV2"));
    assert!(!live_edits.is_empty(), "the draft was never edited: {}", describe(&calls));
    assert!(live_edits.iter().all(|e| e.parse_mode().is_none() && answer.starts_with(e.text().unwrap())));
    // Bounded: a second at least between two updates of the draft, so no more of them than seconds streamed.
    let updates: Vec<Instant> = std::iter::once(draft).chain(live_edits).map(|c| c.at).collect();
    for pair in updates.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_millis(900), "edited too often: {}", describe(&calls));
    }
    let streamed = GAP * 7;
    assert!(updates.len() as u128 <= streamed.as_millis() / 1000 + 1, "{}", describe(&calls));
}

#[tokio::test]
async fn telegram_sends_no_draft_for_a_quick_answer() {
    let llm = ScriptedLlm::start(vec![slow_model("be quick", "Quick **answer**.")]).await;
    // Thinking takes long, but the text comes at once: there is nothing to watch being written.
    llm.set_default_delay(Duration::from_millis(1500));
    let fake = FakeTelegram::start().await;
    let home = telegram_home(&llm, &fake);
    let _daemon = Daemon::start(&home);
    fake.push_text(1, 1, "be quick");
    until(&fake, "the answer", |calls| !calls.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls = chat_calls(&fake);
    assert_eq!(calls.len(), 1, "{}", describe(&calls));
    assert_eq!(calls[0].method, "sendMessage");
    assert_eq!(calls[0].parse_mode(), Some("MarkdownV2"));
    assert_eq!(visible(&calls[0]), "Quick *answer*.");
}

#[tokio::test]
async fn telegram_stop_mid_stream_marks_the_draft_as_cut_and_the_history_keeps_it() {
    let llm = ScriptedLlm::start(vec![
        slow_model("write slowly", ANSWER),
        Script::new("what did you say?", vec![Reply::text("Only the start.")]),
    ])
    .await;
    llm.set_stream_gap(Duration::from_millis(2500));
    let fake = FakeTelegram::start().await;
    let home = telegram_home(&llm, &fake);
    let _daemon = Daemon::start(&home);
    fake.push_text(1, 1, "write slowly");
    let calls = until(&fake, "the draft", |calls| calls.iter().any(|c| c.text() == Some(FIRST_PIECE))).await;
    let draft_id = calls[0].message_id().unwrap();
    fake.push_text(1, 1, "/stop");
    until(&fake, "Stopped.", |calls| calls.iter().any(|c| c.text() == Some("Stopped."))).await;
    let cut = format!("{FIRST_PIECE}{CUT_MARK}");
    let draft = fake.bot_message(1, draft_id).unwrap();
    assert_eq!(draft["text"], Value::from(cut.clone()), "{}", describe(&fake.calls()));

    fake.push_text(1, 1, "what did you say?");
    until(&fake, "the next answer", |calls| calls.iter().any(|c| visible(c) == "Only the start.")).await;
    assert_eq!(requests_for(&llm, "what did you say?"), 1);
    assert_eq!(last_assistant_texts(&llm), [cut]);
}

#[tokio::test]
async fn flood_control_on_a_draft_edit_holds_the_next_edits_back() {
    let llm = ScriptedLlm::start(vec![slow_model("write slowly", ANSWER)]).await;
    llm.set_stream_gap(GAP);
    let fake = FakeTelegram::start().await;
    let (status, body) = FakeTelegram::too_many_requests(2);
    fake.fail_next("editMessageText", status, body);
    let home = telegram_home(&llm, &fake);
    let _daemon = Daemon::start(&home);
    fake.push_text(1, 1, "write slowly");
    until(&fake, "the formatted answer", |calls| calls.last().is_some_and(|c| c.parse_mode() == Some("MarkdownV2")))
        .await;
    let edits = fake.calls_of("editMessageText");
    let refused = edits.iter().position(|e| e.status == 429).unwrap_or_else(|| panic!("{}", describe(&edits)));
    let next = edits.get(refused + 1).unwrap_or_else(|| panic!("{}", describe(&edits)));
    let waited = next.at - edits[refused].at;
    assert!(
        waited >= Duration::from_millis(1950),
        "edited {waited:?} after a 429 asking for 2 s: {}",
        describe(&edits)
    );
    let answer = fake.bot_message(1, chat_calls(&fake)[0].message_id().unwrap()).unwrap();
    assert_eq!(answer["text"], Value::from(ANSWER.replace('.', "\\.")), "the answer replaced the draft after the wait");
}

#[tokio::test]
async fn an_answer_whose_draft_is_gone_arrives_as_a_new_message() {
    let llm = ScriptedLlm::start(vec![slow_model("write slowly", ANSWER)]).await;
    llm.set_stream_gap(GAP);
    let fake = FakeTelegram::start().await;
    // The user deleted the draft before the answer came.
    let gone =
        serde_json::json!({ "ok": false, "error_code": 400, "description": "Bad Request: message to edit not found" });
    fake.fail_next_if("editMessageText", |params| params["parse_mode"] == "MarkdownV2", 400, gone);
    let home = telegram_home(&llm, &fake);
    let _daemon = Daemon::start(&home);
    let (_, asked) = fake.push_text(1, 1, "write slowly");
    let calls = until(&fake, "the answer", |calls| {
        calls.iter().any(|c| c.method == "sendMessage" && c.parse_mode() == Some("MarkdownV2"))
    })
    .await;
    let answer = calls.iter().find(|c| c.parse_mode() == Some("MarkdownV2")).unwrap();
    assert_eq!(visible(answer), ANSWER);
    assert_eq!(answer.reply_to(), Some(asked), "{}", describe(&calls));
}

/// A streamed answer the model stopped at its answer-token limit.
fn cut_stream(text: &str) -> Reply {
    minibot_test_support::scripted_llm::streamed_answer(text, "length", 10)
}

#[tokio::test]
async fn a_continued_answer_streams_on_as_one_text_and_is_printed_once() {
    let llm = ScriptedLlm::start(vec![
        Script::new("write a poem", vec![cut_stream("Roses are red, ")]),
        Script::new(minibot_agent::CONTINUE_CUT_ANSWER, vec![Reply::text("violets are blue.")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let whole = "Roses are red, violets are blue.";
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "write a poem"])).await;
    assert_eq!(stdout(&output), format!("{whole}\n"), "stderr: {}", stderr(&output));

    let screen = once_on_a_terminal(&home, "write a poem").await;
    assert_eq!(screen.matches(whole).count(), 1, "the parts stream on one line, and are not printed again: {screen:?}");
    assert!(!screen.contains("Roses are red, \r\n"), "{screen:?}");
}

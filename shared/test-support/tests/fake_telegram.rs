#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The fake Bot API over HTTP: what it answers parses as frankenstein's types (what the daemon uses), updates
//! wait for their offset, long polls wake on a push, and injected failures, webhooks and tokens behave as on
//! the real server.

use frankenstein::response::MethodResponse;
use frankenstein::types::{File, Message, User};
use frankenstein::updates::{Update, UpdateContent};
use minibot_test_support::FakeTelegram;
use minibot_test_support::fake_telegram::{HttpResponse, http_request};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

async fn post(fake: &FakeTelegram, method: &str, params: Value) -> HttpResponse {
    let url = format!("{}/bot{}/{method}", fake.base_url(), FakeTelegram::TOKEN);
    http_request("POST", &url, &[("Content-Type", "application/json")], params.to_string().as_bytes()).await.unwrap()
}

/// The `result` of a successful call, as `T`.
async fn result<T: serde::de::DeserializeOwned>(fake: &FakeTelegram, method: &str, params: Value) -> T {
    let response = post(fake, method, params).await;
    assert_eq!(response.status, 200, "{method}: {}", response.text());
    serde_json::from_slice::<MethodResponse<T>>(&response.body).unwrap_or_else(|e| panic!("{method}: {e}")).result
}

async fn updates(fake: &FakeTelegram, params: Value) -> Vec<Update> {
    result(fake, "getUpdates", params).await
}

#[tokio::test]
async fn get_me_and_sent_messages_are_frankenstein_types() {
    let fake = FakeTelegram::start().await;
    let me: User = result(&fake, "getMe", json!({})).await;
    assert_eq!((me.id, me.is_bot, me.username.as_deref()), (424_242, true, Some("minibot_test_bot")));
    assert_eq!(me.can_join_groups, Some(true));

    let (_, user_message) = fake.push_text(5, 7, "hello");
    let sent: Message = result(
        &fake,
        "sendMessage",
        json!({ "chat_id": 5, "text": "hi", "reply_parameters": { "message_id": user_message } }),
    )
    .await;
    assert_eq!((sent.message_id, sent.chat.id, sent.text.as_deref()), (1000, 5, Some("hi")));
    assert_eq!(sent.reply_to_message.unwrap().text.as_deref(), Some("hello"));
    let keyboard = json!({ "inline_keyboard": [[{ "text": "Yes", "callback_data": "approval:1:y" }]] });
    let asked: Message = result(
        &fake,
        "sendMessage",
        json!({ "chat_id": 5, "text": "<b>ok?</b>", "parse_mode": "HTML", "reply_markup": keyboard }),
    )
    .await;
    assert_eq!(asked.message_id, 1001);
    let edited: Message = result(&fake, "editMessageReplyMarkup", json!({ "chat_id": 5, "message_id": 1001 })).await;
    assert!(edited.reply_markup.is_none());
    assert!(fake.bot_message(5, 1001).unwrap().get("reply_markup").is_none());
    let _: bool = result(&fake, "sendChatAction", json!({ "chat_id": 5, "action": "typing" })).await;

    assert_eq!(fake.sent_texts(5), ["hi", "<b>ok?</b>"]);
    let calls = fake.calls_of("sendmessage");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].reply_to(), Some(user_message));
    assert_eq!(calls[1].button_data(), ["approval:1:y"]);
    assert_eq!(calls[1].message_id(), Some(1001));
}

#[tokio::test]
async fn every_kind_of_pushed_update_parses_and_an_offset_confirms_them() {
    let fake = FakeTelegram::start().await;
    let (first, text_id) = fake.push_text(1, 1, "/start now");
    let sent: Message = result(&fake, "sendMessage", json!({ "chat_id": 1, "text": "question" })).await;
    let (_, reply_id) = fake.push_reply(1, 1, "about that", i64::from(sent.message_id), "question");
    fake.push_photo(1, 1, b"0123456789", Some("what is this"));
    fake.push_document(1, 1, "notes.txt", "text/plain", b"hello notes", None);
    fake.push_callback(1, 9, i64::from(sent.message_id), "approval:x:y");
    let last = fake.push_raw(json!({ "edited_message": { "message_id": 1, "date": 1, "chat": { "id": 1, "type": "private" }, "text": "e" } }));
    assert_eq!((first, last, text_id, reply_id), (1, 6, 1, 2));
    assert_eq!(fake.pending_updates(), 6);

    let all = updates(&fake, json!({ "timeout": 0 })).await;
    let ids: Vec<u32> = all.iter().map(|u| u.update_id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    let UpdateContent::Message(command) = &all[0].content else { panic!("{:?}", all[0]) };
    assert_eq!(command.entities.as_ref().unwrap()[0].length, 6);
    let UpdateContent::Message(reply) = &all[1].content else { panic!("{:?}", all[1]) };
    assert_eq!(reply.reply_to_message.as_ref().unwrap().message_id, sent.message_id);
    let UpdateContent::Message(photo) = &all[2].content else { panic!("{:?}", all[2]) };
    let sizes = photo.photo.as_ref().unwrap();
    assert_eq!((sizes.len(), sizes[1].file_size, photo.caption.as_deref()), (2, Some(10), Some("what is this")));
    let UpdateContent::Message(document) = &all[3].content else { panic!("{:?}", all[3]) };
    let document = document.document.as_ref().unwrap();
    assert_eq!(document.file_name.as_deref(), Some("notes.txt"));
    let UpdateContent::CallbackQuery(click) = &all[4].content else { panic!("{:?}", all[4]) };
    assert_eq!((click.from.id, click.data.as_deref()), (9, Some("approval:x:y")));
    assert!(matches!(all[5].content, UpdateContent::EditedMessage(_)));

    // A file the user sent can be looked up and downloaded.
    let file: File = result(&fake, "getFile", json!({ "file_id": sizes[1].file_id })).await;
    let url = format!("{}/file/bot{}/{}", fake.base_url(), FakeTelegram::TOKEN, file.file_path.unwrap());
    assert_eq!(http_request("GET", &url, &[], b"").await.unwrap().body, b"0123456789");
    let file: File = result(&fake, "getFile", json!({ "file_id": document.file_id })).await;
    let url = format!("{}/file/bot{}/{}", fake.base_url(), FakeTelegram::TOKEN, file.file_path.unwrap());
    assert_eq!(http_request("GET", &url, &[], b"").await.unwrap().body, b"hello notes");

    // Below the offset: confirmed and gone for good, even for a later poll without an offset.
    let rest = updates(&fake, json!({ "offset": 5, "limit": 1 })).await;
    assert_eq!(rest.iter().map(|u| u.update_id).collect::<Vec<_>>(), [5]);
    assert_eq!(fake.pending_updates(), 2);
    assert_eq!(updates(&fake, json!({})).await.len(), 2);
    // Kinds the bot did not ask for are dropped.
    let only_messages = updates(&fake, json!({ "allowed_updates": ["message", "callback_query"] })).await;
    assert_eq!(only_messages.iter().map(|u| u.update_id).collect::<Vec<_>>(), [5]);
    assert!(updates(&fake, json!({ "offset": 6 })).await.is_empty());
    assert_eq!(fake.pending_updates(), 0);
}

#[tokio::test]
async fn a_long_poll_wakes_on_a_push_and_a_newer_poll_ends_an_older_one() {
    let fake = std::sync::Arc::new(FakeTelegram::start().await);
    let started = Instant::now();
    let polling = fake.clone();
    let poll = tokio::spawn(async move { post(&polling, "getUpdates", json!({ "timeout": 20 })).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    fake.push_text(3, 3, "wake up");
    let answer = poll.await.unwrap().json();
    assert_eq!(answer["result"][0]["message"]["text"], "wake up");
    assert!(started.elapsed() < Duration::from_secs(10), "the poll was not woken by the push");

    // An empty long poll waits its timeout out and answers an empty list.
    fake.push_raw(json!({ "message": { "message_id": 99, "date": 1, "chat": { "id": 3, "type": "private" } } }));
    assert_eq!(updates(&fake, json!({ "offset": 3, "timeout": 1 })).await.len(), 0);

    let polling = fake.clone();
    let older = tokio::spawn(async move { post(&polling, "getUpdates", json!({ "offset": 3, "timeout": 20 })).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let newer = post(&fake, "getUpdates", json!({ "offset": 3, "timeout": 0 })).await;
    assert_eq!(newer.status, 200);
    let older = older.await.unwrap();
    assert_eq!(older.status, 409);
    assert!(older.json()["description"].as_str().unwrap().starts_with("Conflict: terminated by other getUpdates"));
}

#[tokio::test]
async fn polling_is_refused_while_a_webhook_is_set() {
    let fake = FakeTelegram::start().await;
    let _: bool =
        result(&fake, "setWebhook", json!({ "url": "https://bot.example.test/tg/hook", "secret_token": "s3cret" }))
            .await;
    assert_eq!(fake.webhook().unwrap()["secret_token"], "s3cret");
    let refused = post(&fake, "getUpdates", json!({})).await;
    assert_eq!(refused.status, 409);
    assert!(
        refused.text().contains("Conflict: can't use getUpdates method while webhook is active"),
        "{}",
        refused.text()
    );
    let _: bool = result(&fake, "deleteWebhook", json!({})).await;
    assert!(fake.webhook().is_none());
    fake.push_text(1, 1, "polled again");
    assert_eq!(updates(&fake, json!({})).await.len(), 1);
}

#[tokio::test]
async fn a_wrong_or_revoked_token_is_unauthorized() {
    let fake = FakeTelegram::start().await;
    let url = format!("{}/bot424242:WRONG/getMe", fake.base_url());
    let wrong = http_request("GET", &url, &[], b"").await.unwrap();
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json(), json!({ "ok": false, "error_code": 401, "description": "Unauthorized" }));
    let _: User = result(&fake, "getMe", json!({})).await;
    fake.set_token_valid(false);
    assert_eq!(post(&fake, "getMe", json!({})).await.status, 401);
    let calls = fake.calls_of("getMe");
    assert_eq!(calls.iter().map(|c| c.status).collect::<Vec<_>>(), [401, 200, 401]);
}

#[tokio::test]
async fn injected_failures_answer_once_and_only_the_matching_call() {
    let fake = FakeTelegram::start().await;
    let (status, body) = FakeTelegram::too_many_requests(3);
    fake.fail_next("sendMessage", status, body);
    let (status, body) = FakeTelegram::parse_error();
    fake.fail_next_if("sendMessage", |p| p.get("parse_mode").is_some(), status, body);
    fake.fail_next_raw("getUpdates", 200, "not json");

    let limited = post(&fake, "sendMessage", json!({ "chat_id": 1, "text": "a" })).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.json()["parameters"]["retry_after"], 3);
    assert_eq!(post(&fake, "sendMessage", json!({ "chat_id": 1, "text": "plain" })).await.status, 200);
    let refused = post(&fake, "sendMessage", json!({ "chat_id": 1, "text": "b", "parse_mode": "MarkdownV2" })).await;
    assert_eq!(refused.status, 400);
    assert!(refused.json()["description"].as_str().unwrap().contains("can't parse entities"));
    assert_eq!(
        post(&fake, "sendMessage", json!({ "chat_id": 1, "text": "b", "parse_mode": "MarkdownV2" })).await.status,
        200
    );
    let garbage = post(&fake, "getUpdates", json!({})).await;
    assert_eq!((garbage.status, garbage.text()), (200, "not json".to_string()));
    assert_eq!(post(&fake, "getUpdates", json!({})).await.json()["ok"], true);

    assert_eq!(fake.sent_texts(1), ["plain", "b"]);
    assert_eq!(fake.api_calls().len(), 4);
    assert_eq!(fake.calls().len(), 6);
}

#[tokio::test]
async fn texts_are_checked_as_telegram_checks_them() {
    let fake = FakeTelegram::start().await;
    let md = |text: &str| json!({ "chat_id": 1, "text": text, "parse_mode": "MarkdownV2" });
    let refused = post(&fake, "sendMessage", md("Done.")).await.json();
    assert_eq!(
        refused["description"],
        "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'"
    );
    assert_eq!(post(&fake, "sendMessage", md("Done\\. *All* of it\\!")).await.status, 200);
    let long = "a".repeat(4097);
    assert_eq!(
        post(&fake, "sendMessage", json!({ "chat_id": 1, "text": long })).await.json()["description"],
        "Bad Request: message is too long"
    );
    // 4096 visible characters are fine even when the escapes make the text longer.
    assert_eq!(post(&fake, "sendMessage", md(&"\\.".repeat(4096))).await.status, 200);
    assert_eq!(post(&fake, "sendMessage", json!({ "chat_id": 1, "text": " " })).await.status, 400);
    fake.set_markup_checks(false);
    assert_eq!(post(&fake, "sendMessage", md("Done.")).await.status, 200);

    let sent: Message = result(&fake, "sendMessage", json!({ "chat_id": 2, "text": "same" })).await;
    let same = json!({ "chat_id": 2, "message_id": sent.message_id, "text": "same" });
    let unchanged = post(&fake, "editMessageText", same).await.json();
    assert!(unchanged["description"].as_str().unwrap().starts_with("Bad Request: message is not modified"));
    let changed: Message =
        result(&fake, "editMessageText", json!({ "chat_id": 2, "message_id": sent.message_id, "text": "new" })).await;
    assert_eq!(changed.text.as_deref(), Some("new"));
    assert!(changed.edit_date.is_some());
    let missing = post(&fake, "editMessageText", json!({ "chat_id": 2, "message_id": 4242, "text": "x" })).await;
    assert_eq!(missing.json()["description"], "Bad Request: message to edit not found");
    let unknown = post(&fake, "answerCallbackQuery", json!({ "callback_query_id": "nope" })).await;
    assert_eq!(unknown.status, 400);
    assert_eq!(post(&fake, "sendNothing", json!({})).await.status, 404);
}

#[tokio::test]
async fn a_multipart_upload_is_recorded_with_its_fields_and_bytes() {
    let fake = FakeTelegram::start().await;
    let mut body = Vec::new();
    for (name, value) in [("chat_id", "12"), ("caption", "here"), ("reply_parameters", "{\"message_id\":3}")] {
        body.extend_from_slice(
            format!("--BOUND\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        b"--BOUND\r\nContent-Disposition: form-data; name=\"document\"; filename=\"report.csv\"\r\n\
Content-Type: application/octet-stream\r\n\r\na,b\r\n1,2\r\n--BOUND--\r\n",
    );
    let url = format!("{}/bot{}/sendDocument", fake.base_url(), FakeTelegram::TOKEN);
    let response =
        http_request("POST", &url, &[("Content-Type", "multipart/form-data; boundary=BOUND")], &body).await.unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let message = serde_json::from_slice::<MethodResponse<Message>>(&response.body).unwrap().result;
    let document = message.document.unwrap();
    assert_eq!((document.file_name.as_deref(), document.file_size), (Some("report.csv"), Some(8)));
    assert_eq!(message.caption.as_deref(), Some("here"));

    let call = &fake.calls_of("sendDocument")[0];
    assert_eq!(call.params, json!({ "chat_id": 12, "caption": "here", "reply_parameters": { "message_id": 3 } }));
    assert_eq!(call.files, [("document".to_string(), "report.csv".to_string(), b"a,b\r\n1,2".to_vec())]);
    assert_eq!((call.chat_id(), call.text(), call.reply_to()), (Some(12), Some("here"), Some(3)));

    let photo = post(&fake, "sendPhoto", json!({ "chat_id": 12, "photo": "no-such-file" })).await;
    assert_eq!(photo.json()["description"], "Bad Request: there is no photo in the request");
}

#[tokio::test]
#[should_panic(expected = "sendMessage -> 200")]
async fn wait_for_shows_the_calls_when_it_gives_up() {
    let fake = FakeTelegram::start().await;
    post(&fake, "sendMessage", json!({ "chat_id": 1, "text": "only this" })).await;
    fake.wait_for(|calls| calls.len() > 5, Duration::from_millis(100)).await;
}

/// 10,000 messages in 200 chats, read in batches of 100 and each answered, as a busy bot would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_messages_in_two_hundred_chats() {
    let fake = std::sync::Arc::new(FakeTelegram::start().await);
    for n in 0..10_000_i64 {
        fake.push_text(n % 200 + 1, n % 200 + 1, &format!("message {n}"));
    }
    assert_eq!(fake.pending_updates(), 10_000);
    let mut offset = 0;
    let mut answered = 0;
    while answered < 10_000 {
        let batch = updates(&fake, json!({ "offset": offset, "limit": 100, "timeout": 1 })).await;
        assert_eq!(batch.len(), 100);
        let mut senders = Vec::new();
        for update in batch {
            offset = i64::from(update.update_id) + 1;
            let UpdateContent::Message(message) = update.content else { panic!("not a message") };
            let fake = fake.clone();
            senders.push(tokio::spawn(async move {
                let text = format!("re: {}", message.text.unwrap());
                post(&fake, "sendMessage", json!({ "chat_id": message.chat.id, "text": text })).await.status
            }));
        }
        for sender in senders {
            assert_eq!(sender.await.unwrap(), 200);
        }
        answered += 100;
    }
    assert!(updates(&fake, json!({ "offset": offset })).await.is_empty());
    assert_eq!(fake.pending_updates(), 0);
    let calls = fake.wait_for(|calls| calls.len() >= 10_000, Duration::from_secs(5)).await;
    assert_eq!(calls.iter().filter(|c| c.method == "sendMessage").count(), 10_000);
    let chat_7 = fake.sent_texts(7);
    assert_eq!(chat_7.len(), 50);
    assert_eq!(chat_7[0], "re: message 6");
}

//! The chat page. Everything live comes over the socket; the page itself carries only the chat number and
//! this boot's chat token (read by the script, never put in a URL).

use crate::pages::layout::page;
use maud::{Markup, html};

pub fn render(
    chat_id: i64,
    token: &str,
    signed_in: bool,
    limits: &super::uploads::UploadLimits,
    uploads_enabled: bool,
) -> Markup {
    page(
        "Chat",
        "/chat",
        signed_in,
        html! {
            section #chat data-chat=(chat_id) data-token=(token)
                data-max-attachments=(limits.max_attachments) data-max-image-bytes=(limits.max_image_bytes)
                data-max-audio-bytes=(limits.max_audio_bytes) {
                h1 { "Chat " small { code { "web:" (chat_id) } } }
                button #older type="button" hidden { "Older messages" }
                ol #messages aria-live="polite" {}
                div #live hidden {
                    div #tools {}
                    div #draft {}
                }
                p #status role="status" { "Connecting…" }
                form #composer {
                    textarea #text name="text" rows="3" placeholder="Message (Enter sends, Shift+Enter for a new line)" {}
                    div.composer-row {
                        @if uploads_enabled {
                            label.upload { "Attach image or audio " input #files type="file" accept="image/*,audio/*" multiple; }
                        } @else {
                            span.upload.off title="[tools.file_storage] enabled = false" { "Attachments are off (file storage is off)." }
                        }
                        ul #pending-uploads {}
                        button #send type="submit" { "Send" }
                        button #stop type="button" disabled { "Stop" }
                    }
                }
            }
        },
    )
}

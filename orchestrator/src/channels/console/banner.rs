//! What the interactive console says when it starts: which assistant, model and files this is, and how to quit.

use crate::runtime::Runtime;

pub fn banner(rt: &Runtime, chat_id: i64) -> String {
    let model = rt.model_for(&crate::messages::session_id(super::actor::CHANNEL, chat_id));
    let places = rt.config.locations();
    let config = match &places.config_file {
        Some(path) => format!("config  {}", path.display()),
        None => format!("config  no config file (defaults; `minibot init` writes {})", places.would_be.display()),
    };
    // The model's name comes from the config or from `/models`; it reaches the terminal as text only.
    crate::terminal_text::for_terminal(&format!(
        "minibot {} · console chat {chat_id}\n  model   {} (provider {})\n  {config}\n  data    {}\nType a \
         message, /help for commands; /exit or Ctrl-D quits.",
        env!("CARGO_PKG_VERSION"),
        model.settings.model,
        model.provider_name,
        places.data_dir.display(),
    ))
    .into_owned()
}

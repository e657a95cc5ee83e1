//! Step 3: where background tasks run: worker processes on this machine (sqlite) or `minibot-worker`s anywhere
//! through RabbitMQ (which needs a shared signing key, generated into the vault).

use super::args::Backend;
use super::context::Context;
use super::provider::secret_name;

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Rabbitmq => "rabbitmq",
        }
    }
}

/// The most local worker processes the wizard sets up; more is a hand edit away.
const MAX_WORKERS: u32 = 32;
/// `[tasks] local_workers` when the file does not set it.
const DEFAULT_WORKERS: u32 = 2;
const DEFAULT_BROKER: &str = "amqp://guest:guest@localhost:5672/";
const KEY_SECRET: &str = "RABBITMQ_MESSAGE_KEY";

pub fn parse_workers(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n <= MAX_WORKERS => Ok(n),
        _ => Err(format!("`{}` is not a number of workers from 0 to {MAX_WORKERS}", text.trim())),
    }
}

pub fn parse_broker(text: &str) -> Result<String, String> {
    let text = text.trim();
    if (text.starts_with("amqp://") || text.starts_with("amqps://")) && !text.contains(char::is_whitespace) {
        Ok(text.to_string())
    } else {
        Err(format!("`{text}` is not a broker URL such as amqp://user:password@host:5672/"))
    }
}

pub fn step(cx: &mut Context<'_>) -> anyhow::Result<()> {
    cx.ui.say("\nStep 3/4: background tasks");
    let args = cx.args;
    let current = match cx.doc.text(&["tasks", "backend"]).as_deref() {
        Some("rabbitmq") => Backend::Rabbitmq,
        _ => Backend::Sqlite,
    };
    let backend = match args.tasks_backend {
        Some(backend) => backend,
        None if cx.ui.interactive() => {
            let options = [
                ("sqlite", "On this machine: worker processes that minibot starts itself (sqlite)", Backend::Sqlite),
                ("rabbitmq", "On any host: minibot-worker processes through a RabbitMQ broker", Backend::Rabbitmq),
            ];
            cx.ui.pick("Where do background tasks run?", &options, usize::from(current == Backend::Rabbitmq))?
        }
        None => current,
    };
    cx.doc.set_unless_default(&["tasks", "backend"], backend.name(), Backend::Sqlite.name())?;
    match backend {
        Backend::Sqlite => local_workers(cx),
        Backend::Rabbitmq => rabbitmq(cx),
    }
}

fn local_workers(cx: &mut Context<'_>) -> anyhow::Result<()> {
    let int = |key: &str| cx.doc.get(&["tasks", key]).and_then(|i| i.as_integer());
    let current = int("local_workers").and_then(|n| u32::try_from(n).ok()).unwrap_or(DEFAULT_WORKERS);
    let cap = int("max_concurrent_workers").and_then(|n| u32::try_from(n).ok()).unwrap_or(4);
    let workers = match &cx.args.workers {
        Some(text) => parse_workers(text).map_err(|e| anyhow::anyhow!("--workers: {e}"))?,
        None if cx.ui.interactive() => {
            let shown = current.to_string();
            cx.ui.until("How many tasks may run at once (worker processes; 0: none)", Some(&shown), parse_workers)?
        }
        None => current,
    };
    cx.doc.set_unless_default(&["tasks", "local_workers"], i64::from(workers), i64::from(DEFAULT_WORKERS))?;
    // `max_concurrent_workers` caps `local_workers`: raise it, or the number just chosen would silently not apply.
    if workers > cap {
        cx.doc.set(&["tasks", "max_concurrent_workers"], i64::from(workers))?;
    }
    cx.ui.say(&format!("  Tasks run on this machine, {workers} at a time."));
    Ok(())
}

fn rabbitmq(cx: &mut Context<'_>) -> anyhow::Result<()> {
    if cx.args.workers.is_some() {
        anyhow::bail!(
            "--workers: with the rabbitmq backend minibot starts no worker processes itself; run `minibot-worker` \
             on each host instead (docs/tasks.md)"
        );
    }
    let current = cx.doc.text(&["rabbitmq", "broker_url"]);
    let broker = match &cx.args.broker_url {
        Some(url) => parse_broker(url).map_err(|e| anyhow::anyhow!("--broker-url: {e}"))?,
        None if cx.ui.interactive() => {
            let shown = current.clone().unwrap_or_else(|| DEFAULT_BROKER.into());
            cx.ui.until("Broker URL", Some(&shown), parse_broker)?
        }
        None => current.clone().unwrap_or_else(|| DEFAULT_BROKER.into()),
    };
    cx.doc.set(&["rabbitmq", "broker_url"], broker.as_str())?;
    cx.ui.say("  Tasks go through RabbitMQ; start `minibot-worker` on each host that should run them.");
    if cx.doc.text(&["rabbitmq", "message_key"]).is_none() {
        let mut random = minibot_vault::Zeroizing::new([0u8; 32]);
        getrandom::fill(random.as_mut()).map_err(|e| anyhow::anyhow!("no random bytes from the system: {e}"))?;
        let key = minibot_vault::Zeroizing::new(minibot_protocol::generate_key_hex(&random));
        cx.store_secret(KEY_SECRET, &key);
        cx.doc.set(&["rabbitmq", "message_key"], format!("${{secret:{KEY_SECRET}}}"))?;
        cx.ui.say(&format!(
            "  Generated the key that signs every task message ({KEY_SECRET} in the vault). Each worker host needs \
             the same key in its own vault (`minibot vault edit` shows it; docs/deploy.md#signed-messages)."
        ));
    } else if let Some(name) = cx.doc.text(&["rabbitmq", "message_key"]).as_deref().and_then(secret_name) {
        cx.ui.say(&format!("  The message key stays {name} in the vault."));
    }
    Ok(())
}

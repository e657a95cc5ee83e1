//! The Telegram channel's lifecycle ([`Channel`]): `start` checks the token (`getMe`), starts the channel actor
//! and registers it with the router (and, in webhook mode, names the route Telegram posts to); `open` takes
//! updates by long polling or tells Telegram the webhook; `stop` and `flush` end it at shutdown.

use super::access::Access;
use super::actor::{Flush, Telegram};
use super::api::{ApiError, BotApi};
use super::capabilities::{CAPABILITIES, CHANNEL};
use super::outbound::Sender;
use super::updates::UpdateSink;
use super::{inbound, polling, webhook};
use actix::prelude::*;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{DeleteWebhookParams, SetWebhookParams};
use frankenstein::types::AllowedUpdate;
use minibot_channel::messages::{ChannelCapabilities, ChannelHandle, Intake, RegisterChannel};
use minibot_channel::{Channel, ChannelStartError, HttpMount};
use minibot_config::Config;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "channels.telegram.bot_token: Telegram rejected the bot token ({0}); copy the token @BotFather gave you, \
         or set [channels.telegram] enabled = false"
    )]
    BadToken(String),
    #[error("channels.telegram.api_base_url: cannot reach the Telegram Bot API: {0}")]
    Unreachable(String),
    #[error("channels.telegram.webhook_listen: cannot listen on {listen}: {detail}")]
    Listen { listen: String, detail: String },
    #[error("channels.telegram.webhook_url: Telegram refused the webhook: {0}")]
    Webhook(String),
}

/// The Telegram channel as the daemon runs it ([`Channel`]).
pub struct TelegramChannel {
    config: Arc<Config>,
    started: Option<Started>,
    intake: Option<RunningIntake>,
}

/// What [`Channel::start`] set up and [`Channel::open`] needs.
struct Started {
    api: BotApi,
    actor: Addr<Telegram>,
    sink: UpdateSink,
    last_update: actix::Recipient<minibot_channel::messages::LastUpdate>,
    name: String,
    /// Webhook mode: the URL and secret to give `setWebhook` once the server listens.
    webhook: Option<(String, String)>,
}

enum RunningIntake {
    Polling(polling::Poller),
    /// Telegram posts to the daemon's HTTP server; stopping means telling it to stop.
    Webhook,
}

impl TelegramChannel {
    pub fn new(config: Arc<Config>) -> Self {
        Self { config, started: None, intake: None }
    }
}

#[async_trait::async_trait(?Send)]
impl Channel for TelegramChannel {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn capabilities(&self) -> ChannelCapabilities {
        CAPABILITIES
    }

    /// Checks the token (`getMe`), starts the channel actor and registers it with the router.
    async fn start(&mut self, intake: &Intake) -> Result<Vec<HttpMount>, ChannelStartError> {
        let (started, mounts) = prepare(&self.config, intake).await.map_err(|e| ChannelStartError(e.to_string()))?;
        self.started = Some(started);
        Ok(mounts)
    }

    async fn open(
        &mut self,
        _server: Option<&minibot_channel::http::RunningServer>,
    ) -> Result<String, ChannelStartError> {
        let Some(started) = self.started.as_ref() else {
            return Err(ChannelStartError("the Telegram channel was opened before it started".into()));
        };
        let allowed = vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery];
        let api = &started.api;
        let (intake, mode) = match &started.webhook {
            Some((url, secret)) => {
                // One connection: Telegram then posts a chat's updates one after another, in order, as polling
                // reads them.
                let params = SetWebhookParams::builder()
                    .url(url.clone())
                    .secret_token(secret.clone())
                    .allowed_updates(allowed)
                    .max_connections(1)
                    .build();
                if let Err(error) = api.set_webhook(&params).await {
                    return Err(ChannelStartError(StartError::Webhook(error.to_string()).to_string()));
                }
                (RunningIntake::Webhook, format!("webhook {url}"))
            }
            None => {
                // A webhook left from an earlier run would make getUpdates fail; updates it did not deliver are
                // kept.
                let params = DeleteWebhookParams::builder().drop_pending_updates(false).build();
                if let Err(error) = api.delete_webhook(&params).await {
                    return Err(ChannelStartError(StartError::Unreachable(error.to_string()).to_string()));
                }
                let poller =
                    polling::Poller::spawn(api.clone(), started.sink.clone(), started.last_update.clone(), allowed);
                (RunningIntake::Polling(poller), "long polling".into())
            }
        };
        self.intake = Some(intake);
        Ok(format!("Telegram bot {} ({mode})", started.name))
    }

    async fn stop(&mut self) {
        match self.intake.take() {
            Some(RunningIntake::Polling(poller)) => poller.stop().await,
            // Updates Telegram posts from now on are refused with the server; it keeps them for the next start.
            Some(RunningIntake::Webhook) | None => {}
        }
    }

    async fn flush(&self, limit: Duration) -> bool {
        match &self.started {
            Some(started) => started.actor.send(Flush(limit)).await.unwrap_or(false),
            None => true,
        }
    }
}

async fn prepare(config: &Config, intake: &Intake) -> Result<(Started, Vec<HttpMount>), StartError> {
    let section = &config.channels.telegram;
    let api = BotApi::new(&section.api_base_url, section.bot_token.trim(), Default::default())
        .map_err(|e| StartError::Unreachable(e.to_string()))?
        .with_poll_timeout(Duration::from_secs(section.poll_timeout_seconds));
    let me = match api.get_me().await {
        Ok(response) => response.result,
        Err(error) if error.is_unauthorized() => return Err(StartError::BadToken(error.to_string())),
        Err(ApiError::Api { code: 404, description, .. }) => return Err(StartError::BadToken(description)),
        Err(error) => return Err(StartError::Unreachable(error.to_string())),
    };
    let repair = section
        .format_repair_enabled
        .then_some((intake.repair.clone(), section.format_repair_max_attempts))
        .filter(|(_, attempts)| *attempts > 0);
    let sender = Sender { api: api.clone(), repair };
    let delivered = intake.delivered.clone();
    let actor = Supervisor::start(move |_ctx| Telegram::new(sender, delivered));
    intake.register.do_send(RegisterChannel {
        name: CHANNEL.into(),
        handle: ChannelHandle {
            outbound: actor.clone().recipient(),
            progress: actor.clone().recipient(),
            capabilities: CAPABILITIES,
            files: Some(actor.clone().recipient()),
            approvals: Some(actor.clone().recipient()),
            confirms_delivery: true,
        },
    });
    let sink = UpdateSink {
        source: format!("telegram:{}", me.id),
        intake: intake.clone(),
        api: api.clone(),
        access: Arc::new(Access::from_config(section)),
        media: Arc::new(inbound::MediaSettings::from_config(config)),
        actor: actor.clone(),
    };
    let name = me.username.clone().map_or_else(|| me.first_name.clone(), |u| format!("@{u}"));
    let mut mounts = Vec::new();
    let mut webhook = None;
    if section.mode == "webhook" {
        let url = section.webhook_url.clone().unwrap_or_default();
        let secret = section
            .webhook_secret_token
            .clone()
            .filter(|secret| !secret.trim().is_empty())
            .unwrap_or_else(random_secret);
        let listen = section.webhook_listen.parse().map_err(|e: std::net::AddrParseError| StartError::Listen {
            listen: section.webhook_listen.clone(),
            detail: e.to_string(),
        })?;
        mounts.push(webhook::mount(listen, &webhook::path_of(&url), secret.clone(), sink.clone()));
        webhook = Some((url, secret));
    }
    let started = Started { api, actor, sink, last_update: intake.last_update.clone(), name, webhook };
    Ok((started, mounts))
}

/// A per-start secret for the webhook when the config sets none: only Telegram learns it.
fn random_secret() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

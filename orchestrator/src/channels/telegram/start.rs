//! Start-up of the Telegram channel: checks the token (`getMe`), starts the channel actor and registers it with
//! the router, then takes updates by long polling or by webhook. The daemon holds the result to stop the intake
//! and flush what is queued at shutdown.

use super::access::Access;
use super::actor::{Flush, Telegram};
use super::api::{ApiError, BotApi};
use super::capabilities::{CAPABILITIES, CHANNEL};
use super::outbound::Sender;
use super::updates::UpdateSink;
use super::{inbound, polling, webhook};
use crate::messages::{ChannelHandle, Intake, RegisterChannel, ReplayPending};
use actix::prelude::*;
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::{DeleteWebhookParams, SetWebhookParams};
use frankenstein::types::AllowedUpdate;
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

/// The running channel, as the daemon holds it.
pub struct Running {
    pub actor: Addr<Telegram>,
    intake: RunningIntake,
    /// `@username (long polling)`, for the start-up line.
    pub description: String,
    /// How many turns interrupted by the last stop were started again.
    pub replayed: usize,
}

enum RunningIntake {
    Polling(polling::Poller),
    Webhook(webhook::WebhookServer),
}

impl Running {
    /// Stops taking updates; what was taken goes on.
    pub async fn stop_intake(&self) {
        match &self.intake {
            RunningIntake::Polling(poller) => poller.stop().await,
            RunningIntake::Webhook(server) => server.stop().await,
        }
    }

    /// Waits until every queued message is sent (at most `limit`); answers whether all were.
    pub async fn flush(&self, limit: Duration) -> bool {
        self.actor.send(Flush(limit)).await.unwrap_or(false)
    }
}

/// Checks the token (`getMe`), registers the channel with the router and starts taking updates.
pub async fn start(config: &Config, intake: Intake) -> Result<Running, StartError> {
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
    // Turns a crash or a shutdown left pending are back in their conversations before any new update comes in,
    // so a just-recorded update cannot be read as pending and run twice.
    let replayed = intake.replay.send(ReplayPending).await.map(|turns| turns.len()).unwrap_or(0);
    let name = me.username.clone().map_or_else(|| me.first_name.clone(), |u| format!("@{u}"));
    let allowed = vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery];
    let (intake_side, mode) = if section.mode == "webhook" {
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
        let server = webhook::serve(listen, &webhook::path_of(&url), secret.clone(), sink)
            .map_err(|e| StartError::Listen { listen: section.webhook_listen.clone(), detail: e.to_string() })?;
        // One connection: Telegram then posts a chat's updates one after another, in order, as polling reads them.
        let params = SetWebhookParams::builder()
            .url(url.clone())
            .secret_token(secret)
            .allowed_updates(allowed)
            .max_connections(1)
            .build();
        if let Err(error) = api.set_webhook(&params).await {
            server.stop().await;
            return Err(StartError::Webhook(error.to_string()));
        }
        (RunningIntake::Webhook(server), format!("webhook {url}"))
    } else {
        // A webhook left from an earlier run would make getUpdates fail; updates it did not deliver are kept.
        let params = DeleteWebhookParams::builder().drop_pending_updates(false).build();
        if let Err(error) = api.delete_webhook(&params).await {
            return Err(StartError::Unreachable(error.to_string()));
        }
        (
            RunningIntake::Polling(polling::Poller::spawn(api, sink, intake.last_update.clone(), allowed)),
            "long polling".into(),
        )
    };
    Ok(Running { actor, intake: intake_side, description: format!("{name} ({mode})"), replayed })
}

/// A per-start secret for the webhook when the config sets none: only Telegram learns it.
fn random_secret() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

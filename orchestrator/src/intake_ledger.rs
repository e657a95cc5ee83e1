//! What channels hand over to be kept or worked on, away from the router's mailbox: updates recorded with their
//! turns (durable intake), the last update a source delivered, answers confirmed delivered, and the format
//! repair (a model call). The router only routes; nothing here waits in its mailbox.

use crate::format_repair;
use crate::messages::{AcceptUpdates, Delivered, LastUpdate, RepairFormat};
use crate::runtime::Runtime;
use actix::prelude::*;
use minibot_store::Store;
use std::sync::Arc;

pub struct IntakeLedger {
    rt: Arc<Runtime>,
    store: Store,
}

impl IntakeLedger {
    pub fn new(rt: Arc<Runtime>) -> Self {
        Self { store: rt.store.clone(), rt }
    }
}

impl Actor for IntakeLedger {
    type Context = Context<Self>;
}

impl Handler<AcceptUpdates> for IntakeLedger {
    type Result = ResponseFuture<Result<Vec<bool>, String>>;

    /// Only records: the channel then sends each new turn (and its other actions) in update order, and the
    /// update is acknowledged to its source only once its turn is on disk.
    fn handle(&mut self, msg: AcceptUpdates, _ctx: &mut Context<Self>) -> Self::Result {
        let store = self.store.clone();
        let writes: Vec<(i64, Option<minibot_store::PendingWrite>)> = msg
            .updates
            .iter()
            .map(|(update_id, inbound)| {
                let pending = inbound.as_ref().map(|inbound| minibot_store::PendingWrite {
                    event_id: inbound.event_id.clone(),
                    session_id: inbound.session_id(),
                    message_json: serde_json::to_string(inbound).unwrap_or_default(),
                });
                (*update_id, pending)
            })
            .collect();
        let source = msg.source;
        Box::pin(async move {
            let written = store.accept_updates(&source, &writes).await;
            let fresh = written.map_err(|e| format!("cannot record the updates: {e}"))?;
            for ((update_id, _), is_new) in msg.updates.iter().zip(fresh.iter()) {
                if !is_new {
                    tracing::info!(update_id, "update delivered again; already accepted");
                }
            }
            Ok(fresh)
        })
    }
}

impl Handler<LastUpdate> for IntakeLedger {
    type Result = ResponseFuture<Result<Option<i64>, String>>;

    fn handle(&mut self, msg: LastUpdate, _ctx: &mut Context<Self>) -> Self::Result {
        let store = self.store.clone();
        Box::pin(async move { store.last_update_id(&msg.source).await.map_err(|e| e.to_string()) })
    }
}

impl Handler<RepairFormat> for IntakeLedger {
    type Result = ResponseFuture<Result<String, String>>;

    fn handle(&mut self, msg: RepairFormat, _ctx: &mut Context<Self>) -> Self::Result {
        let rt = self.rt.clone();
        Box::pin(async move { format_repair::repair(&rt, &msg).await })
    }
}

impl Handler<Delivered> for IntakeLedger {
    type Result = ();

    fn handle(&mut self, msg: Delivered, _ctx: &mut Context<Self>) {
        let store = self.store.clone();
        actix::spawn(async move {
            for id in msg.event_ids {
                if let Err(error) = store.clear_pending(&id).await {
                    tracing::error!(event_id = %id, error = %error, "cannot clear a delivered turn");
                }
            }
        });
    }
}

//! The part of asking for approval every channel shares: wait for the user's answer, or notice that whoever
//! asked stopped waiting (the approval timeout passed, the turn stopped) and withdraw the question from the chat.

use crate::messages::ApprovalDecision;
use actix::dev::OneshotSender;
use std::future::Future;
use tokio::sync::oneshot;

/// Sends the user's answer to the asker, or runs `withdraw` when the asker is gone first. `channel` names the
/// channel in the reason given when the answer side closes without a decision.
pub fn answer_or_withdraw<W>(
    answer: oneshot::Receiver<ApprovalDecision>,
    tx: Option<OneshotSender<ApprovalDecision>>,
    channel: &'static str,
    withdraw: W,
) where
    W: Future<Output = ()> + 'static,
{
    actix::spawn(async move {
        let Some(mut tx) = tx else {
            withdraw.await;
            return;
        };
        tokio::select! {
            decision = answer => {
                let decision = decision.unwrap_or_else(|_| {
                    ApprovalDecision::Unavailable(format!("the {channel} closed before it answered"))
                });
                let _ = tx.send(decision);
            }
            () = tx.closed() => withdraw.await,
        }
    });
}

//! The stdio transport: the server as a child process in its own process group, its stdout read through the
//! size cap ([`crate::oversize::relay`]).
//!
//! rmcp's `TokioChildProcess` reads the child's stdout itself, with no way to put anything in between, so this
//! does what it does (spawn, talk over the pipes, stop the child on close) with the relay in the read path.

use crate::oversize::{MAX_MESSAGE_BYTES, relay};
use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{ReadHalf, SimplexStream};
use tokio::process::{ChildStderr, ChildStdin};

/// How long a child gets to exit after its stdin closes, and again after SIGTERM, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// Bytes in flight between the relay and rmcp.
const RELAY_BUFFER: usize = 64 * 1024;
/// SIGTERM, the same number on every Unix this runs on.
const SIGTERM: i32 = 15;

pub struct ChildTransport {
    /// `None` once the child has exited or been killed.
    child: Option<Box<dyn ChildWrapper>>,
    io: AsyncRwTransport<RoleClient, ReadHalf<SimplexStream>, ChildStdin>,
}

impl ChildTransport {
    /// Starts `command` with piped stdio; returns the transport and the child's stderr.
    pub fn spawn(mut command: CommandWrap, server: &str) -> std::io::Result<(Self, Option<ChildStderr>)> {
        command.command_mut().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(std::io::Error::other("the child's stdin or stdout is not a pipe"));
        };
        let stderr = child.stderr().take();
        let (reader, writer) = tokio::io::simplex(RELAY_BUFFER);
        // Ends with the child's stdout, or when rmcp drops the reading end.
        tokio::spawn(relay(stdout, writer, MAX_MESSAGE_BYTES, server.to_string()));
        let io = AsyncRwTransport::new_client(reader, stdin);
        Ok((Self { child: Some(child), io }, stderr))
    }

    /// The MCP stdio shutdown: close stdin and let the server exit; SIGTERM its group if it has not; kill it if
    /// that did not help either.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        self.io.close().await?;
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
            if let Err(err) = child.signal(SIGTERM) {
                tracing::debug!(error = %err, "mcp server: SIGTERM failed");
            }
            if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_err() {
                Box::into_pin(child.kill()).await?;
            }
        }
        self.child = None;
        Ok(())
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

impl Drop for ChildTransport {
    /// Not closed gracefully (the session was dropped, or the runtime is going away): kill the whole group now.
    /// The command was made with `kill_on_drop`, so tokio reaps the child.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
        }
    }
}

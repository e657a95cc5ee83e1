#![allow(clippy::expect_used, clippy::unwrap_used)]
//! `amqps://` with `[rabbitmq] tls_ca_file`: a real TLS endpoint (socat terminating TLS with a certificate
//! from a throwaway certificate authority, in front of the broker at `MINIBOT_TEST_AMQP_URL`).

mod support;

use minibot_queue::amqp::{AmqpQueue, AmqpSettings};
use minibot_queue::{TaskQueue, WorkQueue};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn run(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs (install openssl)");
    assert!(status.success(), "openssl {args:?}");
}

/// A certificate authority and a certificate for `localhost` signed by it.
fn certificates(dir: &Path) {
    run(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=minibot test CA",
        ],
    );
    run(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    run(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
}

struct Terminator(Child);

impl Drop for Terminator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// socat listening with TLS on a free port, forwarding to the broker's plain port.
fn terminator(dir: &Path, broker: &str) -> (Terminator, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let target = broker.split('@').nth(1).and_then(|rest| rest.split('/').next()).unwrap_or("127.0.0.1:5672");
    let listen = format!(
        "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={},key={},verify=0",
        dir.join("server.pem").display(),
        dir.join("server.key").display()
    );
    let child = Command::new("socat")
        .args([listen, format!("TCP:{target}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("socat runs (scripts/test installs it)");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "socat did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Terminator(child), port)
}

#[tokio::test]
async fn amqps_with_a_ca_file_carries_tasks_and_an_unknown_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let plain = settings(1);
    let (_socat, port) = terminator(dir.path(), &plain.broker_url);
    let credentials = plain.broker_url.split("://").nth(1).and_then(|r| r.split('@').next()).unwrap_or("guest:guest");
    let tls = AmqpSettings {
        broker_url: format!("amqps://{credentials}@localhost:{port}/%2f"),
        tls_ca_file: Some(dir.path().join("ca.pem")),
        ..plain.clone()
    };

    let untrusted = AmqpSettings { tls_ca_file: None, ..tls.clone() };
    let refused = AmqpQueue::connect(&untrusted, "w1").await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(!refused.is_empty(), "a certificate from an unknown authority must not be accepted");

    let orchestrator = AmqpQueue::connect(&tls, "orchestrator").await.unwrap();
    let worker = AmqpQueue::connect(&tls, "w1").await.unwrap();
    orchestrator.publish(&task("tls-1", 3)).await.unwrap();
    let claimed = claim(&worker).await;
    worker.emit(&claimed, &done("tls-1", 1, "w1")).await.unwrap();
    worker.settle(&claimed).await.unwrap();
    assert_eq!(next(&orchestrator).await.task_id, "tls-1");
    worker.close().await;
    orchestrator.delete_topology().await.unwrap();
    orchestrator.close().await;
}

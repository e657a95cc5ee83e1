mod bridge;
mod conformance;
mod failures;
mod lazy;
mod peers;
mod reload;
mod server;

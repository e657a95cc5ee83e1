mod bridge;
mod conformance;
mod failures;
mod hostile;
mod lazy;
mod peers;
mod reload;
mod server;

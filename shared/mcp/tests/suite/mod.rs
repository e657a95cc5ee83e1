mod bridge;
mod failures;
mod lazy;
mod peers;
mod reload;
mod server;

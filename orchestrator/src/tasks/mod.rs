//! Background tasks on the orchestrator side: [`hub::TaskHub`] serves the delegation tools (records, queue,
//! limits), [`coordinator::TaskCoordinator`] applies worker events and routes results and progress to chats,
//! [`local_workers::LocalWorkers`] starts and supervises worker processes for the SQLite backend, and
//! [`approvals`] asks the task's chat when a worker's tool call needs the user's approval, and [`fleet::Fleet`]
//! keeps the roster of live workers from their heartbeats. The specialists themselves are [`roster::Roster`],
//! which [`management::AgentManager`] changes for the agent-management tools.

pub mod approvals;
pub mod coordinator;
mod demand;
pub mod fleet;
pub mod hub;
pub mod local_workers;
pub mod management;
mod meter;
pub mod roster;
mod texts;

pub use hub::TaskHub;
pub use local_workers::{WorkerCommand, WorkerStart};

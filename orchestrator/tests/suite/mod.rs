mod harness;
mod layout;
mod turns;
mod worker_tasks;

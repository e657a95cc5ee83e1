mod harness;
mod layout;
mod task_support;
mod task_trust;
mod turns;
mod worker_tasks;

mod harness;
mod layout;
mod turns;

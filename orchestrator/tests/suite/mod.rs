mod harness;
mod turns;

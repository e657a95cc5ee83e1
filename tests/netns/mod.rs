//! Simulated hosts for the scale-out test and benchmark: `hosts.sh` makes them, [`lab`] drives it and
//! supervises the workers, [`driver`] is the orchestrator's side on the orch host.

pub mod driver;
pub mod lab;

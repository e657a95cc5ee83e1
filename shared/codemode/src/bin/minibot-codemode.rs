//! The script process for programs that do not carry it themselves (this package's tests and benchmarks);
//! `minibot` and `minibot-worker` carry the same code. Not meant to be run by hand.

use std::process::ExitCode;

fn main() -> ExitCode {
    minibot_codemode::serve_if_asked();
    eprintln!("minibot-codemode runs codemode scripts for minibot; it is not meant to be run by hand");
    ExitCode::from(2)
}

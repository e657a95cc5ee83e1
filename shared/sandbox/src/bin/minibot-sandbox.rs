//! `minibot-sandbox --probe` prints what this host can enforce (JSON);
//! `minibot-sandbox <policy JSON> -- <program> [args…]` runs the program inside the sandbox the policy
//! describes. The tools start it (or `minibot`, which carries the same code); it is not meant to be run by hand.

fn main() {
    minibot_sandbox::helper_main(std::env::args_os().skip(1).collect())
}

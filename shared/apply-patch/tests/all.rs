#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The patch suite: each case starts from a file tree, applies a patch through the same parse → plan → commit
//! path the tool uses, and compares the whole tree afterwards. A refused patch must leave the tree untouched.

mod suite;

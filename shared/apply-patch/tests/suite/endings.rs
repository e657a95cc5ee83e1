//! Line endings survive a patch byte for byte: each line keeps its own, added lines take their neighbours'.

use minibot_apply_patch::{Options, commit_changes, parse_patch, plan_changes};

/// Writes `before` to a file, applies an update of it made of `body`, and returns the file's bytes afterwards.
fn patched(before: &[u8], body: &str) -> Vec<u8> {
    patched_with(before, body, Options::default())
}

fn patched_with(before: &[u8], body: &str, options: Options) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, before).unwrap();
    let patch = format!("*** Begin Patch\n*** Update File: f.txt\n{body}\n*** End Patch");
    let hunks = parse_patch(&patch).unwrap();
    let (changes, _) = plan_changes(&hunks, &|p| Ok(dir.path().join(p)), options).unwrap();
    commit_changes(&changes).unwrap();
    std::fs::read(&file).unwrap()
}

#[track_caller]
fn same(actual: Vec<u8>, expected: &[u8]) {
    assert_eq!(String::from_utf8_lossy(&actual), String::from_utf8_lossy(expected), "bytes differ");
}

#[test]
fn one_crlf_line_does_not_turn_a_lf_file_crlf() {
    same(patched(b"a\nb\r\nc\nd\n", " c\n-d\n+D"), b"a\nb\r\nc\nD\n");
}

#[test]
fn a_replaced_line_keeps_its_own_ending() {
    same(patched(b"a\nb\r\nc\n", " a\n-b\n+B\n c"), b"a\nB\r\nc\n");
}

#[test]
fn a_lone_cr_ends_a_line_and_is_kept() {
    // Split at `\n` only, `a\rb` would be one line and `-b` would not match.
    same(patched(b"a\rb\nc\n", "-b\n+B"), b"a\rB\nc\n");
}

#[test]
fn added_lines_take_the_ending_of_their_neighbours() {
    same(patched(b"x\r\ny\r\nz\n", " x\n+new\n y"), b"x\r\nnew\r\ny\r\nz\n");
    same(patched(b"x\ny\nz\r\n", " x\n+new\n y"), b"x\nnew\ny\nz\r\n");
}

#[test]
fn neighbours_that_disagree_give_the_majority_ending() {
    // Above `b` (CRLF), below `c` (LF); LF is the file's majority.
    same(patched(b"a\nb\r\nc\n", " b\n+new\n c"), b"a\nb\r\nnew\nc\n");
    // Here CRLF is the majority.
    same(patched(b"a\r\nb\nc\r\nd\r\n", " b\n+new\n c"), b"a\r\nb\nnew\r\nc\r\nd\r\n");
}

#[test]
fn appended_lines_in_a_crlf_file_are_crlf() {
    same(patched(b"a\r\nb\r\n", "@@\n+c"), b"a\r\nb\r\nc\r\n");
    // The former last line had no ending; it gets the file's, and so does the new last line.
    same(patched(b"a\r\nb", "@@\n+c"), b"a\r\nb\r\nc\r\n");
}

#[test]
fn without_preserve_a_file_without_final_newline_keeps_none() {
    let options = Options { preserve_trailing_newline: false };
    same(patched_with(b"a\nb", " a\n-b\n+B", options), b"a\nB");
    same(patched_with(b"a\nb\n", " a\n-b\n+B", options), b"a\nB\n");
}

#[test]
fn untouched_lines_are_byte_identical_in_a_mixed_file() {
    let before: &[u8] = b"one\r\ntwo\nthree\rfour\r\nfive\n";
    same(patched(before, " three\n-four\n+FOUR"), b"one\r\ntwo\nthree\rFOUR\r\nfive\n");
}

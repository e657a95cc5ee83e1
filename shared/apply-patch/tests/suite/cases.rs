use minibot_apply_patch::{Options, PatchError, commit_changes, parse_patch, plan_changes};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Tree = BTreeMap<String, String>;

struct Case {
    name: &'static str,
    before: &'static [(&'static str, &'static str)],
    patch: &'static str,
    /// `Ok(tree)` for the files afterwards, `Err(text)` for a refusal whose message contains `text`.
    after: Result<&'static [(&'static str, &'static str)], &'static str>,
}

fn read_tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    fn walk(base: &Path, dir: &Path, out: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

fn confine(root: &Path, written: &str) -> Result<PathBuf, PatchError> {
    if Path::new(written).is_absolute() || written.split('/').any(|p| p == "..") {
        return Err(PatchError::Path { path: written.into(), message: "path escapes workspace root".into() });
    }
    Ok(root.join(written))
}

fn apply(root: &Path, patch: &str) -> Result<String, PatchError> {
    let hunks = parse_patch(patch)?;
    let (changes, summary) = plan_changes(&hunks, &|p| confine(root, p), Options::default())?;
    commit_changes(&changes)?;
    Ok(summary.text())
}

fn to_tree(files: &[(&str, &str)]) -> Tree {
    files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn run(case: &Case) {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in case.before {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
    let outcome = apply(dir.path(), case.patch);
    let tree = read_tree(dir.path());
    match (&case.after, outcome) {
        (Ok(expected), Ok(_)) => {
            assert_eq!(tree, to_tree(expected), "case `{}`: wrong tree after the patch", case.name)
        }
        (Err(needle), Err(err)) => {
            assert!(err.to_string().contains(needle), "case `{}`: error {err:?} lacks {needle:?}", case.name);
            assert_eq!(tree, to_tree(case.before), "case `{}`: a refused patch changed files", case.name);
        }
        (Ok(_), Err(err)) => panic!("case `{}` should apply, got {err}", case.name),
        (Err(needle), Ok(summary)) => panic!("case `{}` should fail with {needle:?}, got {summary}", case.name),
    }
}

const LINES_20: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\nl13\nl14\nl15\nl16\nl17\nl18\nl19\nl20\n";

const CASES: &[Case] = &[
    Case {
        name: "add a file",
        before: &[],
        patch: "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch",
        after: Ok(&[("a.txt", "one\ntwo\n")]),
    },
    Case {
        name: "add an empty file",
        before: &[],
        patch: "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch",
        after: Ok(&[("empty.txt", "\n")]),
    },
    Case {
        name: "add creates folders",
        before: &[],
        patch: "*** Begin Patch\n*** Add File: a/b/c.txt\n+deep\n*** End Patch",
        after: Ok(&[("a/b/c.txt", "deep\n")]),
    },
    Case {
        name: "add overwrites an existing file, as MiniBot did",
        before: &[("a.txt", "old\n")],
        patch: "*** Begin Patch\n*** Add File: a.txt\n+new\n*** End Patch",
        after: Ok(&[("a.txt", "new\n")]),
    },
    Case {
        name: "delete a file",
        before: &[("a.txt", "x\n"), ("b.txt", "y\n")],
        patch: "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch",
        after: Ok(&[("b.txt", "y\n")]),
    },
    Case {
        name: "delete a missing file",
        before: &[("b.txt", "y\n")],
        patch: "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch",
        after: Err("Failed to delete file"),
    },
    Case {
        name: "simple replacement",
        before: &[("a.py", "def f():\n    return 1\n")],
        patch: "*** Begin Patch\n*** Update File: a.py\n def f():\n-    return 1\n+    return 2\n*** End Patch",
        after: Ok(&[("a.py", "def f():\n    return 2\n")]),
    },
    Case {
        name: "@@ anchor picks the occurrence after it",
        before: &[("a.txt", "a\nx = 1\nb\nx = 1\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ b\n-x = 1\n+x = 2\n*** End Patch",
        after: Ok(&[("a.txt", "a\nx = 1\nb\nx = 2\n")]),
    },
    Case {
        name: "several chunks in order",
        before: &[("n.txt", "1\n2\n3\n4\n5\n6\n")],
        patch: "*** Begin Patch\n*** Update File: n.txt\n 1\n-2\n+two\n@@\n 5\n-6\n+six\n*** End Patch",
        after: Ok(&[("n.txt", "1\ntwo\n3\n4\n5\nsix\n")]),
    },
    Case {
        name: "fuzzy: trailing whitespace in the file",
        before: &[("a.txt", "foo   \nbar\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n foo\n-bar\n+baz\n*** End Patch",
        after: Ok(&[("a.txt", "foo\nbaz\n")]),
    },
    Case {
        name: "fuzzy: indentation differs",
        before: &[("a.py", "    if x:\n        y()\n")],
        patch: "*** Begin Patch\n*** Update File: a.py\n-if x:\n+    if z:\n*** End Patch",
        after: Ok(&[("a.py", "    if z:\n        y()\n")]),
    },
    Case {
        name: "fuzzy: smart quotes in the file",
        before: &[("a.py", "print(\u{201C}hi\u{201D})\n")],
        patch: "*** Begin Patch\n*** Update File: a.py\n-print(\"hi\")\n+print('hi')\n*** End Patch",
        after: Ok(&[("a.py", "print('hi')\n")]),
    },
    Case {
        name: "fuzzy: en dash in the patch",
        before: &[("a.txt", "a - b\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-a \u{2013} b\n+a + b\n*** End Patch",
        after: Ok(&[("a.txt", "a + b\n")]),
    },
    Case {
        name: "exact match wins over an earlier fuzzy one",
        before: &[("a.txt", "x  \ny\nx\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-x\n+z\n*** End Patch",
        after: Ok(&[("a.txt", "x  \ny\nz\n")]),
    },
    Case {
        name: "pure insertion after an anchor",
        before: &[("a.py", "def f():\n    pass\n")],
        patch: "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n+    \"\"\"Doc.\"\"\"\n*** End Patch",
        after: Ok(&[("a.py", "def f():\n    \"\"\"Doc.\"\"\"\n    pass\n")]),
    },
    Case {
        name: "append at end of file",
        before: &[("a.txt", "a\nb\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n+c\n*** End of File\n*** End Patch",
        after: Ok(&[("a.txt", "a\nb\nc\n")]),
    },
    Case {
        name: "added lines after a bare @@ go to the end of the file (the format's rule for a chunk without context)",
        before: &[("a.txt", "a\nb\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n+c\n+d\n*** End Patch",
        after: Ok(&[("a.txt", "a\nb\nc\nd\n")]),
    },
    Case {
        name: "added lines without any @@ go to the end of the file",
        before: &[("a.txt", "a\nb")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n+c\n*** End Patch",
        after: Ok(&[("a.txt", "a\nb\nc\n")]),
    },
    Case {
        name: "an added-only chunk after an edit still goes to the end",
        before: &[("a.txt", "1\n2\n3\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-1\n+one\n@@\n+4\n*** End Patch",
        after: Ok(&[("a.txt", "one\n2\n3\n4\n")]),
    },
    Case {
        name: "the format's published example: add, update with move, delete",
        before: &[("src/app.py", "def greet():\nprint(\"Hi\")\n"), ("obsolete.txt", "old\n")],
        patch: "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** Delete File: obsolete.txt\n*** End Patch",
        after: Ok(&[("hello.txt", "Hello world\n"), ("src/main.py", "def greet():\nprint(\"Hello, world!\")\n")]),
    },
    Case {
        name: "deleting a folder says it is a folder",
        before: &[("dir/x.txt", "x\n")],
        patch: "*** Begin Patch\n*** Delete File: dir\n*** End Patch",
        after: Err("dir: Failed to delete file: it is a folder"),
    },
    Case {
        name: "updating a folder says it is a folder",
        before: &[("dir/x.txt", "x\n")],
        patch: "*** Begin Patch\n*** Update File: dir\n-x\n+y\n*** End Patch",
        after: Err("it is a folder"),
    },
    Case {
        name: "end-of-file anchor edits the last occurrence",
        before: &[("a.txt", "x\ny\nx\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-x\n+z\n*** End of File\n*** End Patch",
        after: Ok(&[("a.txt", "x\ny\nz\n")]),
    },
    Case {
        name: "move with an edit",
        before: &[("a.txt", "one\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n-one\n+two\n*** End Patch",
        after: Ok(&[("b.txt", "two\n")]),
    },
    Case {
        name: "move into a new folder",
        before: &[("a.txt", "one\ntwo\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n*** Move to: sub/dir/a.txt\n one\n-two\n+2\n*** End Patch",
        after: Ok(&[("sub/dir/a.txt", "one\n2\n")]),
    },
    Case {
        name: "unified header at the exact line",
        before: &[("a.txt", "l1\nl2\nl3\nl4\nl5\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ -3,1 +3,1 @@\n-l3\n+L3\n*** End Patch",
        after: Ok(&[("a.txt", "l1\nl2\nL3\nl4\nl5\n")]),
    },
    Case {
        name: "unified header two lines off",
        before: &[("a.txt", "l1\nl2\nl3\nl4\nl5\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ -5,1 +5,1 @@\n-l3\n+L3\n*** End Patch",
        after: Ok(&[("a.txt", "l1\nl2\nL3\nl4\nl5\n")]),
    },
    Case {
        name: "unified header with two candidates in the window",
        before: &[("a.txt", "a\nx\nb\nx\nc\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ -3,1 +3,1 @@\n-x\n+y\n*** End Patch",
        after: Err("ambiguous near line 3"),
    },
    Case {
        name: "unified header far from the lines",
        before: &[("a.txt", LINES_20)],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ -1,1 +1,1 @@\n-l15\n+L15\n*** End Patch",
        after: Err("did not match near line 1"),
    },
    Case {
        name: "stale context",
        before: &[("a.txt", "current\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-previous\n+next\n*** End Patch",
        after: Err("Failed to find expected lines"),
    },
    Case {
        name: "missing @@ anchor",
        before: &[("a.txt", "a\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ class Gone:\n-a\n+b\n*** End Patch",
        after: Err("Failed to find context 'class Gone:'"),
    },
    Case {
        name: "multi-file patch with one bad hunk writes nothing",
        before: &[("a.txt", "a\n"), ("b.txt", "b\n")],
        patch: "*** Begin Patch\n*** Add File: new.txt\n+new\n*** Update File: a.txt\n-a\n+A\n*** Delete File: b.txt\n*** Update File: a.txt\n-zzz\n+y\n*** End Patch",
        after: Err("Failed to find expected lines"),
    },
    Case {
        name: "heredoc wrapper",
        before: &[],
        patch: "cat <<'EOF'\n*** Begin Patch\n*** Add File: h.txt\n+hi\n*** End Patch\nEOF",
        after: Ok(&[("h.txt", "hi\n")]),
    },
    Case {
        name: "markers with surrounding whitespace",
        before: &[],
        patch: "\n  *** Begin Patch  \n*** Add File: s.txt\n+ok\n   *** End Patch\n\n",
        after: Ok(&[("s.txt", "ok\n")]),
    },
    Case {
        name: "missing Begin marker",
        before: &[("a.txt", "a\n")],
        patch: "*** Update File: a.txt\n-a\n+b\n*** End Patch",
        after: Err("missing Begin/End markers"),
    },
    Case {
        name: "markers out of order",
        before: &[],
        patch: "*** End Patch\n*** Add File: a.txt\n+a\n*** Begin Patch",
        after: Err("missing Begin/End markers"),
    },
    Case { name: "empty patch", before: &[], patch: "*** Begin Patch\n*** End Patch", after: Err("empty patch") },
    Case {
        name: "no hunks, only commentary",
        before: &[],
        patch: "*** Begin Patch\nI will now edit the file.\n*** End Patch",
        after: Err("no hunks found"),
    },
    Case {
        name: "stray line inside an update",
        before: &[("a.txt", "a\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-a\nb without prefix\n*** End Patch",
        after: Err("invalid patch line 4"),
    },
    Case {
        name: "add line without plus",
        before: &[],
        patch: "*** Begin Patch\n*** Add File: a.txt\n+ok\nnot ok\n*** End Patch",
        after: Err("must start with '+'"),
    },
    Case {
        name: "update without changes",
        before: &[("a.txt", "a\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n*** End Patch",
        after: Err("has no changes"),
    },
    Case {
        name: "a trailing newline is added",
        before: &[("a.txt", "a\nb")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-b\n+c\n*** End Patch",
        after: Ok(&[("a.txt", "a\nc\n")]),
    },
    Case {
        name: "CRLF files stay CRLF",
        before: &[("w.txt", "a\r\nb\r\n")],
        patch: "*** Begin Patch\n*** Update File: w.txt\n a\n-b\n+c\n*** End Patch",
        after: Ok(&[("w.txt", "a\r\nc\r\n")]),
    },
    Case {
        name: "trailing blank context line the file lacks",
        before: &[("a.txt", "a\nb\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n a\n-b\n+c\n \n*** End Patch",
        after: Ok(&[("a.txt", "a\nc\n")]),
    },
    Case {
        name: "two updates of one file chain",
        before: &[("a.txt", "1\n2\n3\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-1\n+one\n*** Update File: a.txt\n-3\n+three\n*** End Patch",
        after: Ok(&[("a.txt", "one\n2\nthree\n")]),
    },
    Case {
        name: "add then update the same file",
        before: &[],
        patch: "*** Begin Patch\n*** Add File: x.txt\n+a\n+b\n*** Update File: x.txt\n-b\n+c\n*** End Patch",
        after: Ok(&[("x.txt", "a\nc\n")]),
    },
    Case {
        name: "update after delete",
        before: &[("a.txt", "a\n")],
        patch: "*** Begin Patch\n*** Delete File: a.txt\n*** Update File: a.txt\n-a\n+b\n*** End Patch",
        after: Err("deleted earlier in this patch"),
    },
    Case {
        name: "update a missing file",
        before: &[],
        patch: "*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch",
        after: Err("Failed to read file to update"),
    },
    Case {
        name: "path escaping the workspace",
        before: &[("a.txt", "a\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Add File: ../evil.txt\n+x\n*** End Patch",
        after: Err("path escapes workspace root"),
    },
    Case {
        name: "insertion and replacement at the same line keep their order",
        before: &[("a.txt", "a\nb\nc\n")],
        patch: "*** Begin Patch\n*** Update File: a.txt\n@@ a\n+inserted\n@@\n-b\n+B\n*** End Patch",
        after: Ok(&[("a.txt", "a\ninserted\nB\nc\n")]),
    },
    Case {
        name: "blank line inside the context without its leading space",
        before: &[("a.py", "def f():\n\n    return 1\n")],
        patch: "*** Begin Patch\n*** Update File: a.py\n def f():\n\n-    return 1\n+    return 2\n*** End Patch",
        after: Ok(&[("a.py", "def f():\n\n    return 2\n")]),
    },
];

#[test]
fn patch_suite() {
    assert!(CASES.len() >= 30);
    for case in CASES {
        run(case);
    }
}

#[test]
fn summary_lists_files_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.txt"), "a\n").unwrap();
    std::fs::write(dir.path().join("d.txt"), "a\n").unwrap();
    let summary = apply(
        dir.path(),
        "*** Begin Patch\n*** Add File: n.txt\n+x\n*** Update File: m.txt\n-a\n+b\n*** Delete File: d.txt\n*** End Patch",
    )
    .unwrap();
    assert_eq!(summary, "Success. Updated the following files:\nA n.txt\nM m.txt\nD d.txt");
}

#[test]
fn a_failed_write_restores_the_files_already_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    // A folder where the patch wants a file's parent: planning passes, writing fails on the second change.
    std::fs::write(dir.path().join("blocker"), "file, not folder\n").unwrap();
    let hunks =
        parse_patch("*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Add File: blocker/x.txt\n+x\n*** End Patch")
            .unwrap();
    let (changes, _) = plan_changes(&hunks, &|p| confine(dir.path(), p), Options::default()).unwrap();
    assert!(commit_changes(&changes).is_err());
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "a\n", "the first write was rolled back");
}

use minibot_apply_patch::{Options, apply_chunks, parse_patch};
use proptest::prelude::*;

/// Lines that look like patch syntax, so generated inputs reach deep into the parser.
fn patch_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*** Begin Patch".to_string()),
        Just("*** End Patch".to_string()),
        Just("*** End of File".to_string()),
        "\\*\\*\\* (Add|Delete|Update) File: [a-z./]{0,8}".prop_map(|s| s),
        "\\*\\*\\* Move to: [a-z./]{0,8}".prop_map(|s| s),
        "@@[ \\-+0-9,@a-z]{0,16}".prop_map(|s| s),
        "[ +\\-][a-z \u{201C}\u{2013}\u{A0}]{0,8}".prop_map(|s| s),
        ".{0,12}".prop_map(|s| s),
        Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_text(text in "(?s).{0,400}") {
        let _ = parse_patch(&text);
    }

    #[test]
    fn parse_and_apply_never_panic_on_patch_like_text(
        lines in prop::collection::vec(patch_line(), 0..30),
        file in prop::collection::vec("[a-z \u{201D}]{0,6}", 0..12),
    ) {
        let mut text = String::from("*** Begin Patch\n");
        text.push_str(&lines.join("\n"));
        text.push_str("\n*** End Patch");
        if let Ok(hunks) = parse_patch(&text) {
            let original = file.join("\n");
            for hunk in hunks {
                if let minibot_apply_patch::Hunk::Update { chunks, .. } = hunk {
                    let _ = apply_chunks(&original, &chunks, "f", Options::default());
                }
            }
        }
    }
}

use minibot_tools::utility::evaluate;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn evaluate_never_panics_on_any_text(text in ".{0,80}") {
        let _ = evaluate(&text, 1000);
    }

    #[test]
    fn evaluate_never_panics_on_arithmetic_soup(text in "[0-9.()+*/% -]{0,60}") {
        let _ = evaluate(&text, 1000);
    }

    #[test]
    fn evaluate_never_panics_on_big_powers(base in "[0-9]{1,30}", exp in "-?[0-9]{1,5}") {
        let _ = evaluate(&format!("{base}**{exp}"), 1000);
        let _ = evaluate(&format!("({base})**({exp})**2"), 1000);
    }
}

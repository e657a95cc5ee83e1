//! `list_skills` ranking (reference §3.12): exact name, then names starting with the query (shorter first),
//! then names containing it (earlier first), then descriptions containing it (earlier first), all
//! case-insensitive, ties by name. Only when none of those match does a fuzzy pass run: names or descriptions
//! similar enough to the query, most similar first, which catches typos ("pdf-extractr").

use crate::registry::Skill;
use std::cmp::Ordering;
use std::sync::Arc;

/// The most skills one `list_skills` call returns.
pub const MAX_MATCHES: usize = 8;
/// The least similarity (0..1) a fuzzy match needs: Sørensen–Dice over letter pairs or normalised Levenshtein,
/// whichever is higher. 0.7 keeps a typo or two in a word ("spredsheet", "pdf-extractr") and drops words that
/// merely share letters ("fetched" and "whether" score 0.43).
pub const FUZZY_THRESHOLD: f64 = 0.7;

/// The skills a query selected.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub matches: Vec<Arc<Skill>>,
    /// Whether they came from the fuzzy pass.
    pub used_fuzzy_fallback: bool,
}

/// Ranks `skills` against `query`; a missing or blank query lists them by name.
pub fn rank(skills: &[Arc<Skill>], query: Option<&str>) -> Ranked {
    let Some(query) = query.map(str::trim).filter(|q| !q.is_empty()) else {
        let mut all: Vec<Arc<Skill>> = skills.to_vec();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.truncate(MAX_MATCHES);
        return Ranked { matches: all, used_fuzzy_fallback: false };
    };
    let query = query.to_lowercase();
    let mut direct: Vec<(DirectKey, &Arc<Skill>)> =
        skills.iter().filter_map(|skill| direct_key(skill, &query).map(|key| (key, skill))).collect();
    if !direct.is_empty() {
        direct.sort_by(|a, b| a.0.cmp(&b.0));
        let matches = direct.into_iter().take(MAX_MATCHES).map(|(_, skill)| Arc::clone(skill)).collect();
        return Ranked { matches, used_fuzzy_fallback: false };
    }
    let mut fuzzy: Vec<(f64, String, &Arc<Skill>)> = skills
        .iter()
        .map(|skill| (similarity(skill, &query), skill.name.to_lowercase(), skill))
        .filter(|(score, _, _)| *score >= FUZZY_THRESHOLD)
        .collect();
    fuzzy.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then_with(|| a.1.cmp(&b.1)));
    let matches: Vec<Arc<Skill>> = fuzzy.into_iter().take(MAX_MATCHES).map(|(_, _, skill)| Arc::clone(skill)).collect();
    let used_fuzzy_fallback = !matches.is_empty();
    Ranked { matches, used_fuzzy_fallback }
}

/// (tier, position within the tier, name): how a direct match sorts.
type DirectKey = (u8, usize, String);

/// The key for the four direct tiers; `None` when none applies.
fn direct_key(skill: &Skill, query: &str) -> Option<DirectKey> {
    let name = skill.name.to_lowercase();
    let description = skill.description.to_lowercase();
    if name == query {
        return Some((0, 0, name));
    }
    if name.starts_with(query) {
        let length = name.chars().count();
        return Some((1, length, name));
    }
    if let Some(at) = name.find(query) {
        return Some((2, name[..at].chars().count(), name));
    }
    if let Some(at) = description.find(query) {
        return Some((3, description[..at].chars().count(), name));
    }
    None
}

fn similarity(skill: &Skill, query: &str) -> f64 {
    let name = skill.name.to_lowercase();
    let description = skill.description.to_lowercase();
    let against_name = strsim::sorensen_dice(query, &name).max(strsim::normalized_levenshtein(query, &name));
    // A query is short and a description long: compare with each word run of the query's length instead of
    // the whole text, so a typo in one word still finds the description that uses it.
    let words: Vec<&str> = description.split_whitespace().collect();
    let span = query.split_whitespace().count().max(1);
    let against_description = words
        .windows(span.min(words.len()).max(1))
        .map(|window| strsim::normalized_levenshtein(query, &window.join(" ")))
        .fold(0.0, f64::max);
    against_name.max(against_description)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::SkillSource;

    fn skill(name: &str, description: &str) -> Arc<Skill> {
        Arc::new(Skill {
            name: name.into(),
            description: description.into(),
            compatibility: None,
            body: "b".into(),
            source: SkillSource::Project,
            dir: None,
        })
    }

    fn names(ranked: &Ranked) -> Vec<&str> {
        ranked.matches.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn tiers_come_in_order() {
        let skills = vec![
            skill("pdf-extractor-advanced", "x"),
            skill("notes", "Take notes from a PDF file"),
            skill("convert-pdf", "y"),
            skill("pdf", "z"),
            skill("pdf-tools", "w"),
            skill("to-pdf", "v"),
        ];
        let ranked = rank(&skills, Some("PDF"));
        assert_eq!(names(&ranked), ["pdf", "pdf-tools", "pdf-extractor-advanced", "to-pdf", "convert-pdf", "notes"]);
        assert!(!ranked.used_fuzzy_fallback);
    }

    #[test]
    fn typos_fall_back_to_fuzzy_and_nonsense_finds_nothing() {
        let skills = vec![skill("pdf-extractor", "Pull text out of documents"), skill("calendar", "Dates")];
        let ranked = rank(&skills, Some("pdf-extractr"));
        assert_eq!(names(&ranked), ["pdf-extractor"]);
        assert!(ranked.used_fuzzy_fallback);
        assert_eq!(names(&rank(&skills, Some("documnts"))), ["pdf-extractor"]);
        let none = rank(&skills, Some("zzqqxx"));
        assert!(none.matches.is_empty() && !none.used_fuzzy_fallback);
        let unrelated = rank(&[skill("minibot-docs", "Answer questions, even whether they say docs")], Some("fetched"));
        assert!(unrelated.matches.is_empty(), "letters in common are not a match");
    }

    #[test]
    fn no_query_lists_by_name_up_to_eight() {
        let skills: Vec<_> = (0..12).rev().map(|i| skill(&format!("s{i:02}"), "")).collect();
        let ranked = rank(&skills, None);
        assert_eq!(ranked.matches.len(), MAX_MATCHES);
        assert_eq!(ranked.matches[0].name, "s00");
        assert_eq!(rank(&skills, Some("  ")).matches.len(), MAX_MATCHES);
    }
}

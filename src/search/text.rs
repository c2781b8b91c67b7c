//! Text queries: case-insensitive substring, prefix (`autocomplete`) and fuzzy matching.

use serde_json::Value;

use super::eval::lookup;
use crate::api::profile_query::{TEXT_FIELDS, TextQuery};

/// A text query checked once and ready to run against many documents or field values
/// (the rules are those of [`text_matches`]).
pub struct TextMatcher<'q> {
    /// The query text in lower case, as characters (edit distances count characters).
    needle: Vec<char>,
    needle_str: String,
    fields: Vec<&'q str>,
    prefix: bool,
    max_edits: usize,
}

impl<'q> TextMatcher<'q> {
    /// Prepares `query`.
    pub fn new(query: &'q TextQuery) -> Self {
        let fields = match &query.fields {
            None => TEXT_FIELDS.to_vec(),
            Some(fields) => fields.iter().map(String::as_str).collect(),
        };
        let needle_str = query.text.to_lowercase();
        let needle: Vec<char> = needle_str.chars().collect();
        let max_edits = if query.fuzzy == Some(true) {
            needle.len() / 4
        } else {
            0
        };
        TextMatcher {
            needle,
            needle_str,
            fields,
            prefix: query.autocomplete == Some(true),
            max_edits,
        }
    }

    /// Whether one of the query's fields of `doc` matches.
    pub fn matches(&self, doc: &Value) -> bool {
        self.fields.iter().any(|path| {
            lookup(doc, path)
                .and_then(Value::as_str)
                .is_some_and(|text| self.matches_field(text))
        })
    }

    /// The field paths the query reads.
    pub fn fields(&self) -> &[&'q str] {
        &self.fields
    }

    /// Whether one string field value matches the query.
    pub fn matches_field(&self, value: &str) -> bool {
        self.matches_text(&value.to_lowercase())
    }

    fn matches_text(&self, haystack: &str) -> bool {
        if self.max_edits == 0 {
            return if self.prefix {
                haystack.starts_with(&self.needle_str)
            } else {
                haystack.contains(&self.needle_str)
            };
        }
        let haystack: Vec<char> = haystack.chars().collect();
        fewest_edits(&self.needle, &haystack, self.prefix) <= self.max_edits
    }
}

/// The fewest single-character insertions, deletions and substitutions that turn `needle` into
/// some substring of `haystack` (or, with `prefix_only`, into some prefix of it).
///
/// This is the Levenshtein table with a free end (Sellers' algorithm): `row[j]` is the best
/// distance from the needle's first `i` characters to a piece of the haystack ending at `j`.
/// A free start (row 0 all zeros) allows any substring; a fixed start (row 0 = `j`) only
/// prefixes.
pub(super) fn fewest_edits(needle: &[char], haystack: &[char], prefix_only: bool) -> usize {
    let mut previous: Vec<usize> = (0..=haystack.len())
        .map(|j| if prefix_only { j } else { 0 })
        .collect();
    let mut current = vec![0; haystack.len() + 1];
    for (i, &n) in needle.iter().enumerate() {
        current[0] = i + 1;
        for (j, &h) in haystack.iter().enumerate() {
            let substitute = previous[j] + usize::from(n != h);
            let delete = previous[j + 1] + 1;
            let insert = current[j] + 1;
            current[j + 1] = substitute.min(delete).min(insert);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous
        .into_iter()
        .min()
        .expect("the table row has haystack.len() + 1 >= 1 entries")
}

/// The text query: does any of the query's fields of `doc` match `query.text`?
///
/// * Fields: `query.fields`, default `token_address`, `metadata.name`, `metadata.symbol`. A
///   field path outside those three, or an empty list, is an error. A field that is missing or
///   not a string never matches.
/// * Case: both sides are put in Unicode lower case (`str::to_lowercase`) first.
/// * Default: the text is a substring of the field.
/// * `autocomplete: true`: the text is a prefix of the field.
/// * `fuzzy: true`: the text is within `k` edits of some substring of the field (with
///   `autocomplete`, of some prefix), where an edit inserts, deletes or substitutes one
///   character and `k = floor(characters of the lower-cased text / 4)`. A whole word is one of
///   those substrings, so a word match within `k` edits matches too. Texts under four characters
///   get `k = 0`, the exact rule.
/// * An empty text matches every document with a string in one of the fields.
pub fn text_matches(query: &TextQuery, doc: &Value) -> bool {
    TextMatcher::new(query).matches(doc)
}

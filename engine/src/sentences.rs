//! Which parts of a memory's content get an embedding of their own, and
//! whether a content only asks ([`is_question`]).
//!
//! One vector for a whole turn blurs what it says: "Before I forget, my new
//! manager, Marcus, wants weekly one-on-ones. How should I prepare for a job
//! interview?" has cosine .16 to "Who is my current boss?", its first
//! sentence alone .29. So a content of several sentences also gets one
//! vector per sentence, and recall scores the memory by the closest of them
//! and the whole ([`crate::Breakdown::sentence_cosine`]). Dedup and the
//! similar band (§3) still compare whole contents.
//!
//! Measured with all-MiniLM-L6-v2 by the cosine ranking alone: LoCoMo (1,535
//! questions, turn level) recall_any@10 / nDCG@10 .499 / .297 → .641 /
//! .422; 200 answerable generated probes (seed 7) .970 / .835 → .975 / .899,
//! and the best single top-cosine abstention cut .892 → .912.

/// Most sentence vectors one memory gets: a longer content is cut into
/// this many runs of consecutive sentences, so a 16 KiB memory costs at
/// most 17 embeddings.
pub const MAX_SENTENCES: usize = 16;

/// The sentences of `content` that are embedded apart, in order: the text
/// is cut after `.`, `!` or `?` followed by white space, and at line
/// breaks; pieces without a letter or digit are dropped. A content of one
/// sentence gets none (its whole vector is that sentence's); one of more
/// than [`MAX_SENTENCES`] gets that many runs of neighbouring sentences.
///
/// A content that opens with a short label and a colon, as a line of a
/// transcript does (`Caroline: …`, `User: …`), keeps it on every sentence:
/// "who said it" is often what the question asks. On LoCoMo (turns written
/// as `<speaker>: <text>`) the cosine ranking's recall_any@10 / nDCG@10 is
/// .642 / .424 with the label on every sentence and .529 / .322 without.
///
/// ```
/// use recall::sentences;
/// assert_eq!(
///     sentences("Deploys run at noon. Freezes start Friday!\nAsk Dana first."),
///     ["Deploys run at noon.", "Freezes start Friday!", "Ask Dana first."]
/// );
/// assert_eq!(
///     sentences("Melanie: I painted a sunrise. It took all week!"),
///     ["Melanie: I painted a sunrise.", "Melanie: It took all week!"]
/// );
/// assert!(sentences("One sentence, v1.2 included.").is_empty());
/// ```
pub fn sentences(content: &str) -> Vec<String> {
    let label = label(content);
    let cut = cut(content);
    cut.into_iter()
        .enumerate()
        .map(|(i, piece)| match label {
            Some(label) if i > 0 || !piece.starts_with(label) => format!("{label}: {piece}"),
            _ => piece.to_string(),
        })
        .collect()
}

/// Longest label [`sentences`] carries over, in bytes.
const MAX_LABEL_BYTES: usize = 40;

/// The `Name` of a content opening with `Name: `: at most three words and
/// [`MAX_LABEL_BYTES`], no sentence punctuation.
fn label(content: &str) -> Option<&str> {
    let head = content.get(..content.len().min(MAX_LABEL_BYTES + 2))?;
    let (name, _) = head.split_once(": ")?;
    let name = name.trim();
    let plain = !name.is_empty()
        && name.split_whitespace().count() <= 3
        && !name.contains(['.', '!', '?', '\n', ':']);
    plain.then_some(name)
}

/// Whether every sentence of `content` is a question: it ends with `?`
/// (before closing quotes or brackets) and is shorter than 24 words (a
/// longer one carries statements, `LONG_QUESTION_WORDS`). Sentences are
/// cut as [`sentences`] cuts them; a content without a letter or digit
/// asks nothing.
///
/// A memory that only asks ("What are some cheap date ideas in
/// Montreal?", a request a user once made) states nothing that could
/// answer a later question, so the abstention gate asks more of it
/// ([`crate::ScoringConfig::question_evidence`]).
///
/// ```
/// use recall::is_question;
/// assert!(is_question("Can you recommend podcasts about rain? Or audiobooks?"));
/// assert!(!is_question("My manager is Marcus. How should I prepare?"));
/// assert!(is_question("Dana: \"Is the freeze on Friday?\""));
/// assert!(!is_question("Write a short haiku about rain."));
/// assert!(!is_question("?!"));
/// // A long question tells something on the way.
/// assert!(!is_question("Honestly, what use is a history degree these days, when every \
///     job ad I scroll past wants five years of sales experience and a car?"));
/// ```
pub fn is_question(content: &str) -> bool {
    // Recall asks this of every candidate it scores; most memories state
    // and hold no question mark at all.
    if !content.contains('?') {
        return false;
    }
    let pieces = pieces(content);
    !pieces.is_empty()
        && pieces.iter().all(|&(start, end)| {
            let piece = &content[start..end];
            piece
                .trim_end_matches(['"', '\'', ')', ']', '\u{201d}', '\u{2019}'])
                .ends_with('?')
                && piece.split_whitespace().count() < LONG_QUESTION_WORDS
        })
}

/// Words from which a question is taken to carry statements of its own: a
/// request is short ("Can you recommend podcasts about rain?"), while a
/// question of 24 words or more tells something on the way ("Honestly,
/// what use is a history degree these days, when every job ad I scroll
/// past wants five years of sales experience and a car?"). Measured:
/// `docs/MEASUREMENTS.md`, section `LONG_QUESTION_WORDS`.
const LONG_QUESTION_WORDS: usize = 24;

/// The pieces [`sentences`] embeds, before labels.
fn cut(content: &str) -> Vec<&str> {
    let pieces = pieces(content);
    if pieces.len() < 2 {
        return Vec::new();
    }
    if pieces.len() <= MAX_SENTENCES {
        return pieces.into_iter().map(|(s, e)| &content[s..e]).collect();
    }
    // Runs of neighbouring sentences, as even as the count allows.
    let n = pieces.len();
    (0..MAX_SENTENCES)
        .map(|run| {
            let first = run * n / MAX_SENTENCES;
            let last = (run + 1) * n / MAX_SENTENCES - 1;
            &content[pieces[first].0..pieces[last].1]
        })
        .collect()
}

/// `content`'s sentences and lines, as trimmed byte ranges: cut after `.`,
/// `!` or `?` followed by white space, and at line breaks; pieces without
/// a letter or digit are dropped.
fn pieces(content: &str) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut after_stop = false;
    for (at, c) in content.char_indices() {
        if c == '\n' || (after_stop && c.is_whitespace()) {
            push_piece(content, start, at, &mut pieces);
            start = at + c.len_utf8();
        }
        after_stop = matches!(c, '.' | '!' | '?');
    }
    push_piece(content, start, content.len(), &mut pieces);
    pieces
}

/// Records `content[start..end]`, trimmed, when it holds a letter or digit.
fn push_piece(content: &str, start: usize, end: usize, pieces: &mut Vec<(usize, usize)>) {
    let piece = &content[start..end];
    let trimmed = piece.trim();
    if !trimmed.chars().any(char::is_alphanumeric) {
        return;
    }
    let lead = piece.len() - piece.trim_start().len();
    pieces.push((start + lead, start + lead + trimmed.len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_cut_into_its_sentences() {
        assert_eq!(
            sentences(
                "Oh, and my new manager, Marcus, wants weekly one-on-ones. How should I prepare?"
            ),
            [
                "Oh, and my new manager, Marcus, wants weekly one-on-ones.",
                "How should I prepare?"
            ]
        );
        // Abbreviations and numbers without a following space do not cut.
        assert!(sentences("Use v2.1 (see docs.rs) for e.g.this.").is_empty());
        // Punctuation-only pieces and blank lines are dropped.
        assert_eq!(
            sentences("First line\n\n...\n  second line  "),
            ["First line", "second line"]
        );
        assert!(sentences("").is_empty());
        assert!(sentences("Just one!").is_empty());
    }

    #[test]
    fn a_long_content_gets_runs_of_neighbouring_sentences() {
        let text: String = (0..40).map(|i| format!("Sentence {i}. ")).collect();
        let runs = sentences(&text);
        assert_eq!(runs.len(), MAX_SENTENCES);
        assert!(runs[0].starts_with("Sentence 0.") && runs[0].ends_with("Sentence 1."));
        assert!(runs[15].ends_with("Sentence 39."));
        // Every sentence is in exactly one run, in order.
        let joined = runs.join(" ");
        assert_eq!(joined, text.trim_end());
    }
}

//! Which words of a query name someone or something ("Caroline", "Stripe",
//! "JWT"): the input of the unknown-name rule of abstention
//! ([`crate::ScoringConfig::unknown_names`]). A pure function of the text;
//! whether a memory mentions a name is the lexical index's question.

/// Month and weekday names: capitalized in English, yet a date is not a
/// name a memory has to mention (a memory's date is its `observed_at`, not
/// its text).
const CALENDAR: [&str; 19] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// The words of `query` that name someone or something: capitalized words
/// that do not open a sentence (nor a line), other than `I` and month and
/// weekday names, each once, cut at an apostrophe ("Maria's" → "Maria").
/// A word is a run of letters and digits that starts with a letter.
///
/// Capitals carry this meaning in English; a query written in title case
/// or in a language that capitalizes every noun names more words than it
/// means, which only makes the rule that reads them fire less often (it
/// needs every named word to be unknown).
///
/// ```
/// use recall::named_words;
/// assert_eq!(named_words("When did Caroline visit the LGBTQ center?"), ["Caroline", "LGBTQ"]);
/// assert_eq!(named_words("Where did Maria's dog go in June?"), ["Maria"]);
/// assert!(named_words("Can I ship to production on Friday afternoon?").is_empty());
/// assert!(named_words("Stripe retries. Why did checkout fail?").is_empty()); // sentence openers
/// ```
pub fn named_words(query: &str) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    let mut opens_sentence = true;
    let mut rest = query;
    while let Some(start) = rest.find(|c: char| c.is_alphanumeric()) {
        if ends_sentence(&rest[..start]) {
            opens_sentence = true;
        }
        let tail = &rest[start..];
        let len = tail
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(tail.len());
        let word = &tail[..len];
        rest = &tail[len..];
        // "Maria's", "Maria’s": the name is what comes before the apostrophe.
        if let Some(after) = rest.strip_prefix('\'').or_else(|| rest.strip_prefix('’')) {
            let suffix = after
                .find(|c: char| !c.is_alphanumeric())
                .unwrap_or(after.len());
            rest = &after[suffix..];
        }
        let was_opening = std::mem::replace(&mut opens_sentence, false);
        if was_opening || !is_name(word) || names.contains(&word) {
            continue;
        }
        names.push(word);
    }
    names
}

/// Whether `query` asks for advice for the one asking ("what should I
/// cook", "can we", "any tips"): a modal with `I` or `we` right after it
/// ("should I", "can we", "do I", …) or "any"/"some" before "tips",
/// "ideas", "advice", "suggestions" or "recommendations". Such a request
/// draws on the user's preferences whatever it names (the aisle seat they
/// always take answers "any tips for my flight to Reykjavik?"), so the
/// unknown-name rule leaves it alone. Questions about what someone else
/// advised ("What did Tim recommend to John?") are not requests.
///
/// ```
/// use recall::asks_for_advice;
/// assert!(asks_for_advice("What should I order at the Thai place tonight?"));
/// assert!(asks_for_advice("Any tips for my flight to Reykjavik?"));
/// assert!(!asks_for_advice("What book did Caroline recommend to Melanie?"));
/// ```
pub fn asks_for_advice(query: &str) -> bool {
    const MODALS: [&str; 6] = ["should", "shall", "can", "could", "do", "would"];
    const ASKED: [&str; 5] = ["tips", "ideas", "advice", "suggestions", "recommendations"];
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.windows(2).any(|pair| {
        let (first, second) = (pair[0].as_str(), pair[1].as_str());
        (MODALS.contains(&first) && matches!(second, "i" | "we"))
            || (matches!(first, "any" | "some") && ASKED.contains(&second))
    })
}

/// Whether the text between two words ends a sentence or a line.
fn ends_sentence(between: &str) -> bool {
    between.contains(['.', '?', '!', '\n', ':'])
}

/// A capitalized word that is neither `I` nor a calendar word (and does
/// not start with a digit).
fn is_name(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_uppercase() && word != "I" && !CALENDAR.iter().any(|c| word.eq_ignore_ascii_case(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_about_people_names_them() {
        assert_eq!(
            named_words("What did Melanie and Caroline paint together?"),
            ["Melanie", "Caroline"]
        );
        assert_eq!(
            named_words("Did Jon's shop open? Ask Gina about Jon."),
            ["Jon", "Gina"]
        );
    }

    #[test]
    fn sentence_openers_pronoun_and_dates_are_not_names() {
        assert!(named_words("Why did the checkout outage happen?").is_empty());
        assert!(named_words("I'm asking: What did I say on Monday, 3 March?").is_empty());
        assert!(named_words("first line\nSecond line starts here").is_empty());
    }

    #[test]
    fn acronyms_and_products_are_names() {
        assert_eq!(
            named_words("How do I throttle my batch job so the API stops rejecting it?"),
            ["API"]
        );
        assert_eq!(named_words("where do JWT tokens go"), ["JWT"]);
    }

    #[test]
    fn a_request_for_advice_is_told_from_a_question_about_advice() {
        assert!(asks_for_advice(
            "Which language should I use for the Android app?"
        ));
        assert!(asks_for_advice("Could we ship on Friday?"));
        assert!(asks_for_advice("Got any ideas for a rainy day?"));
        assert!(!asks_for_advice(
            "What advice did Tim give John about endorsements?"
        ));
        assert!(!asks_for_advice(
            "When did Joanna watch the movie I mentioned?"
        ));
        assert!(!asks_for_advice("Which hotel did we book in Seville?"));
    }

    #[test]
    fn a_dotted_abbreviation_ends_its_sentence() {
        // "Dr." reads as the end of a sentence, so "Seuss" opens the next:
        // an abbreviation costs a name, never invents one.
        assert_eq!(
            named_words("Would Ana like Dr. Seuss books?"),
            ["Ana", "Dr"]
        );
    }
}

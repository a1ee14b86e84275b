//! A seeded generator of LongMemEval-style probes (written in the exact
//! LongMemEval format, [`crate::longmemeval`]).
//!
//! Each instance is a haystack of dated chat sessions (user turns with
//! assistant replies) and one question. Filler sessions are everyday
//! assistant chatter from templates with many slots, so wording varies; the
//! evidence turn sits at a random position of a random session, sometimes
//! wrapped in a lead-in and a trailing request. Questions paraphrase the
//! evidence rather than repeat it (a lexical ranker must not get them for
//! free). Types:
//!
//! - `single-session-user`: one personal fact, asked back.
//! - `single-session-preference`: a stated preference; the question asks for
//!   a recommendation it should shape.
//! - `multi-session`: 2–3 related events in different sessions; the
//!   question counts them (every evidence turn is gold).
//! - `knowledge-update`: an old value, and a later session that changes it;
//!   both are gold and the newer must rank first (`ku_newest_first`).
//! - `temporal-reasoning`: dated events; "how many days ago" or "which came
//!   first".
//! - abstention: `question_id` ends in `_abs` (LongMemEval's convention;
//!   `question_type` stays the base type): the question is about a fact the
//!   haystack never mentions, so the right retrieval is nothing.
//!
//! Same seed, same file.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::longmemeval::{Instance, Turn, format_date};

/// How many probes and how big their haystacks are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeConfig {
    /// Seed; same seed, same probes.
    pub seed: u64,
    /// Instances of each of the five answerable types; as many abstention
    /// instances again (so `6 × per_type` in all).
    pub per_type: usize,
    /// Sessions per haystack (evidence sessions included). Default 10.
    pub sessions: usize,
    /// User turns per session: at least the first, below the second. Default 3..7.
    pub turns: (usize, usize),
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            seed: 7,
            per_type: 20,
            sessions: 10,
            turns: (3, 7),
        }
    }
}

/// A personal fact: how the user says it, how it is asked back.
struct Fact {
    values: &'static [&'static str],
    statements: &'static [&'static str],
    questions: &'static [&'static str],
}

const FACTS: &[Fact] = &[
    Fact {
        values: &["Biscuit", "Luna", "Pepper", "Mochi", "Captain"],
        statements: &[
            "We finally brought home a rescue puppy last week and the kids named him {v}.",
            "Our new pup {v} chewed through another one of my shoes this morning.",
        ],
        questions: &[
            "What did we name the dog we adopted?",
            "What is my puppy called?",
        ],
    },
    Fact {
        values: &["bike", "commuter train", "ferry", "electric scooter"],
        statements: &[
            "These days I get to the office by {v}; it takes about forty minutes each way.",
            "I switched to taking the {v} to work and honestly my mornings are calmer.",
        ],
        questions: &[
            "How do I usually travel to my job?",
            "What's my daily commute like?",
        ],
    },
    Fact {
        values: &[
            "pediatric nurse",
            "architect",
            "chemistry teacher",
            "firefighter",
        ],
        statements: &[
            "My sister just started a new position as a {v} downtown.",
            "My younger sister has been working as a {v} for about a year now.",
        ],
        questions: &[
            "What does my sister do for a living?",
            "What is my sibling's occupation?",
        ],
    },
    Fact {
        values: &["peanuts", "shellfish", "penicillin", "sesame"],
        statements: &[
            "The allergist confirmed I'm allergic to {v}, which explains the hives.",
            "Turns out I react badly to {v}; the test results came back yesterday.",
        ],
        questions: &[
            "What did the test show I'm allergic to?",
            "Which allergy was I diagnosed with?",
        ],
    },
    Fact {
        values: &[
            "a used Subaru Outback",
            "a red Mazda 3",
            "a Toyota Prius",
            "a Honda Civic hatchback",
        ],
        statements: &[
            "I finally traded in my old sedan for {v}.",
            "Picked up {v} from the dealership on Saturday, so no more bus rides.",
        ],
        questions: &[
            "What vehicle did I end up buying?",
            "Which car do I drive now?",
        ],
    },
    Fact {
        values: &["cello", "ukulele", "saxophone", "drum"],
        statements: &[
            "I signed up for beginner {v} lessons on Thursday evenings.",
            "My {v} teacher says I'm progressing faster than she expected.",
        ],
        questions: &[
            "Which musical instrument am I learning?",
            "What instrument have I started playing?",
        ],
    },
    Fact {
        values: &[
            "3 hours 52 minutes",
            "4 hours 10 minutes",
            "3 hours 41 minutes",
        ],
        statements: &[
            "I ran the city marathon on Sunday and crossed the line in {v}!",
            "Still sore from the marathon; my official finishing time was {v}.",
        ],
        questions: &[
            "How long did it take me to finish the marathon?",
            "What was my race result?",
        ],
    },
    Fact {
        values: &[
            "The Overstory",
            "Project Hail Mary",
            "Middlemarch",
            "Klara and the Sun",
        ],
        statements: &[
            "Our book club picked {v} for this month and I'm about halfway through.",
            "The reading group voted for {v} as our next novel.",
        ],
        questions: &[
            "Which novel is my reading group discussing?",
            "What are we reading for book club?",
        ],
    },
    Fact {
        values: &["Ballard", "Capitol Hill", "Fremont", "Georgetown"],
        statements: &[
            "We signed the lease on a two-bedroom apartment in {v}.",
            "Moving boxes everywhere since we relocated to {v} last weekend.",
        ],
        questions: &[
            "Which neighborhood did we move to?",
            "Where is our new place?",
        ],
    },
    Fact {
        values: &[
            "Lincoln Elementary",
            "Oakwood Montessori",
            "Riverside Academy",
        ],
        statements: &[
            "My daughter starts kindergarten at {v} in September.",
            "We got the acceptance letter: our girl is enrolled at {v} this fall.",
        ],
        questions: &[
            "Where will my daughter attend school?",
            "Which school is my kid going to?",
        ],
    },
    Fact {
        values: &[
            "a pottery wheel",
            "noise-cancelling headphones",
            "a telescope",
            "an espresso machine",
        ],
        statements: &[
            "For my husband's birthday I got him {v}, and he loved it.",
            "I wrapped up {v} as a birthday present for my partner.",
        ],
        questions: &[
            "What gift did I give my spouse?",
            "What did I buy my husband for his birthday?",
        ],
    },
    Fact {
        values: &["Portuguese", "Japanese", "Korean", "Italian"],
        statements: &[
            "I've been practicing {v} on Duolingo every morning before work.",
            "My {v} tutor and I meet twice a week over video now.",
        ],
        questions: &[
            "Which foreign language am I studying?",
            "What language have I been learning?",
        ],
    },
    Fact {
        values: &[
            "fiddle-leaf fig",
            "monstera",
            "snake plant",
            "bonsai juniper",
        ],
        statements: &[
            "The {v} I keep by the living room window finally has new leaves.",
            "I repotted my {v} today; its roots were circling the old pot.",
        ],
        questions: &[
            "What houseplant do I have by the window?",
            "Which plant did I repot?",
        ],
    },
    Fact {
        values: &["Lisbon", "Kyoto", "Banff", "Oaxaca"],
        statements: &[
            "For our tenth anniversary we're flying to {v} in October.",
            "We just booked flights to {v} to celebrate our wedding anniversary.",
        ],
        questions: &[
            "Where are we going for our anniversary trip?",
            "Which destination did we pick to celebrate being married ten years?",
        ],
    },
    Fact {
        values: &["Priya", "Marcus", "Dana", "Tomasz"],
        statements: &[
            "My new manager, {v}, wants weekly one-on-ones.",
            "I had my first review with {v}, who took over our team last month.",
        ],
        questions: &[
            "Who is my current boss?",
            "What's the name of the person I report to?",
        ],
    },
    Fact {
        values: &["a sourdough starter", "kombucha", "kimchi", "hot sauce"],
        statements: &[
            "I started fermenting {v} in the kitchen and it smells intense.",
            "My batch of homemade {v} is finally ready after two weeks.",
        ],
        questions: &[
            "What have I been fermenting at home?",
            "Which homemade ferment did I make?",
        ],
    },
];

/// A stated preference and a request it should shape.
struct Preference {
    statements: &'static [&'static str],
    questions: &'static [&'static str],
    answer: &'static str,
}

const PREFERENCES: &[Preference] = &[
    Preference {
        statements: &[
            "I've been fully vegan for two years now, so no meat, eggs or dairy for me.",
            "Since going plant-based I never cook with animal products at all.",
        ],
        questions: &[
            "Any ideas for what I could make for dinner this week?",
            "What should I cook for friends this weekend?",
        ],
        answer: "Plant-based recipes without meat, eggs or dairy.",
    },
    Preference {
        statements: &[
            "I can't stand crowded tourist spots; I'd much rather hike somewhere quiet in the mountains.",
            "Busy cities drain me, give me a remote trail and a cabin any day.",
        ],
        questions: &[
            "Where should I go for a long weekend getaway?",
            "Can you suggest a vacation spot for next month?",
        ],
        answer: "Quiet mountain hiking destinations away from crowds.",
    },
    Preference {
        statements: &[
            "Give me science fiction with hard science any day; romance plots bore me.",
            "I mostly read hard sci-fi, the more physics the better.",
        ],
        questions: &[
            "What book should I pick up next?",
            "Can you recommend something to read on my flight?",
        ],
        answer: "Hard science fiction, not romance.",
    },
    Preference {
        statements: &[
            "I take my coffee black with no sugar, and I love light Ethiopian roasts.",
            "Light roasts from Ethiopia, brewed black, that's my morning ritual.",
        ],
        questions: &[
            "Which beans should I order for my morning brew?",
            "Any suggestions for a café order for me?",
        ],
        answer: "Light Ethiopian roasts, black.",
    },
    Preference {
        statements: &[
            "Because of my bad knee I stick to swimming and cycling instead of running.",
            "My knee can't handle impact anymore, so it's pool laps and the bike for me.",
        ],
        questions: &[
            "What workout routine would you recommend for me?",
            "How should I train to get fitter this spring?",
        ],
        answer: "Low-impact training such as swimming and cycling.",
    },
    Preference {
        statements: &[
            "I love slow-burn psychological thrillers, but jump-scare horror is not for me.",
            "Tense mind-game movies are my favourite; cheap scares ruin a film for me.",
        ],
        questions: &[
            "Can you recommend a film for Friday night?",
            "What should we stream this evening?",
        ],
        answer: "Slow-burn psychological thrillers, no jump-scare horror.",
    },
];

/// Related events counted across sessions.
struct Tally {
    items: &'static [&'static str],
    statements: &'static [&'static str],
    question: &'static str,
}

const TALLIES: &[Tally] = &[
    Tally {
        items: &[
            "a cordless drill",
            "a ladder",
            "a set of wrenches",
            "a paint sprayer",
            "a stud finder",
        ],
        statements: &[
            "I picked up {v} at the hardware store today for the renovation.",
            "Added {v} to my toolbox this afternoon, the remodel needs it.",
        ],
        question: "How many tools have I bought for the house renovation?",
    },
    Tally {
        items: &["Dune", "Circe", "The Road", "Educated", "Piranesi"],
        statements: &[
            "Just finished reading {v}, what a ride.",
            "I turned the last page of {v} last night.",
        ],
        question: "How many books have I finished recently?",
    },
    Tally {
        items: &[
            "a jazz concert",
            "a stand-up comedy show",
            "a pottery class",
            "a wine tasting",
            "a trivia night",
        ],
        statements: &[
            "Went to {v} last night with some friends.",
            "A few of us went out to {v} yesterday evening.",
        ],
        question: "How many outings have I had with friends lately?",
    },
];

/// A value that changes: the first telling and the later correction.
struct Update {
    values: &'static [&'static str],
    before: &'static str,
    after: &'static str,
    question: &'static str,
}

const UPDATES: &[Update] = &[
    Update {
        values: &["$1,850", "$2,100", "$1,600", "$2,400"],
        before: "Our rent for the apartment is {v} a month.",
        after: "The landlord raised our rent, it's {v} a month starting now.",
        question: "How much do I pay for housing each month?",
    },
    Update {
        values: &[
            "Stripe",
            "a small biotech startup",
            "the city library",
            "Boeing",
        ],
        before: "I'm working at {v} as a data analyst.",
        after: "Big news, I left my old job and joined {v} this week.",
        question: "Where am I employed at the moment?",
    },
    Update {
        values: &["24:10", "22:45", "23:30", "21:58"],
        before: "My best 5k time so far is {v}.",
        after: "New personal record on the 5k today: {v}!",
        question: "What is my fastest time over five kilometres?",
    },
    Update {
        values: &["three", "four", "five", "six"],
        before: "We keep {v} chickens in the backyard coop.",
        after: "A couple of new hens joined the flock, so we have {v} chickens now.",
        question: "How many hens do we have?",
    },
    Update {
        values: &["Austin", "Denver", "Pittsburgh", "Raleigh"],
        before: "My parents live in {v}, so I fly there for the holidays.",
        after: "My parents sold their house and moved to {v} last month.",
        question: "Which city are my mom and dad living in?",
    },
];

/// A dated event and how a question refers to it.
struct Event {
    statement: &'static str,
    paraphrase: &'static str,
}

const EVENTS: &[Event] = &[
    Event {
        statement: "I got my wisdom teeth removed today and I'm feeling pretty rough.",
        paraphrase: "have my dental surgery",
    },
    Event {
        statement: "We closed on the house this morning, we're homeowners!",
        paraphrase: "finish buying our home",
    },
    Event {
        statement: "I adopted two kittens from the shelter this afternoon.",
        paraphrase: "bring the cats home from the rescue",
    },
    Event {
        statement: "I passed my driving test today on the first try!",
        paraphrase: "get my driver's license",
    },
    Event {
        statement: "Just got back from my cousin's wedding in Denver.",
        paraphrase: "attend the family wedding",
    },
    Event {
        statement: "I submitted my thesis to the committee today.",
        paraphrase: "hand in my dissertation",
    },
    Event {
        statement: "I finally got my second vaccine shot this morning.",
        paraphrase: "receive the booster injection",
    },
];

const LEAD_INS: &[&str] = &[
    "",
    "",
    "",
    "Before I forget, ",
    "Random update: ",
    "Oh, and ",
    "Unrelated, but ",
];

const FILLER: &[&str] = &[
    "Can you explain how {tech} handles {concept} in simple terms?",
    "What's a good way to store leftover {food} so it stays fresh?",
    "I'm planning a weekend in {city}; which areas are worth walking around?",
    "How long should I cook {food} to get a soft texture?",
    "Could you draft a polite email asking a coworker to review my {doc} by Friday?",
    "What are the main differences between {tech} and {tech2}?",
    "Give me three stretches for my {body} after sitting all day.",
    "How do I get rid of {pest} in the garden without harsh chemicals?",
    "Summarize the plot of {film} without spoilers, please.",
    "What's the best way to learn {skill} as a complete beginner?",
    "Is it worth upgrading my laptop's memory from {n} to {n2} gigabytes?",
    "Can you suggest a catchy name for a {project} about {theme}?",
    "How do I work out a {n} percent tip on a bill of {money} dollars?",
    "What usually causes {symptom} after a long flight?",
    "Write a short haiku about {theme}.",
    "How should I prepare for a job interview in {field}?",
    "What's the history behind {landmark}?",
    "Help me plan a budget: I take home {money} a month and want to save more.",
    "Why does my {appliance} make a clicking noise when it starts?",
    "How would I say 'where is the train station' in {lang}?",
    "My {doc} feels too long; what sections could I cut?",
    "What's a reasonable weekly schedule for practicing {skill}?",
    "Which is healthier for breakfast, {food} or {food2}?",
    "How do I fix a merge conflict in {tech} projects?",
    "Can you recommend podcasts about {theme}?",
    "What should I pack for three days in {city} in the rain?",
    "How often should I service my {appliance}?",
    "Explain {concept} to me like I'm new to {tech}.",
    "What are some cheap date ideas in {city}?",
    "How do I keep {pest} away from my porch at night?",
];

const SLOTS: &[(&str, &[&str])] = &[
    ("{tech2}", &["Go", "TypeScript", "Docker", "SQLite", "Vue"]),
    (
        "{tech}",
        &["Python", "Rust", "Kubernetes", "PostgreSQL", "React", "Git"],
    ),
    (
        "{concept}",
        &[
            "memory management",
            "concurrency",
            "indexing",
            "caching",
            "error handling",
        ],
    ),
    ("{food2}", &["oatmeal", "yogurt", "granola", "toast"]),
    (
        "{food}",
        &["rice", "quinoa", "spinach", "salmon", "lentils", "eggs"],
    ),
    (
        "{city}",
        &["Chicago", "Barcelona", "Montreal", "Edinburgh", "Melbourne"],
    ),
    (
        "{doc}",
        &[
            "slide deck",
            "quarterly report",
            "design document",
            "grant proposal",
        ],
    ),
    ("{body}", &["lower back", "neck", "hips", "shoulders"]),
    (
        "{pest}",
        &["aphids", "slugs", "snails", "ants", "mosquitoes"],
    ),
    (
        "{film}",
        &["Casablanca", "Inception", "Spirited Away", "The Godfather"],
    ),
    (
        "{skill}",
        &[
            "watercolor painting",
            "chess",
            "touch typing",
            "public speaking",
            "knitting",
        ],
    ),
    (
        "{project}",
        &["podcast", "newsletter", "mobile app", "bakery"],
    ),
    (
        "{theme}",
        &["autumn", "the ocean", "city life", "friendship", "rain"],
    ),
    (
        "{symptom}",
        &["swollen ankles", "headaches", "fatigue", "dry eyes"],
    ),
    (
        "{field}",
        &["marketing", "nursing", "software engineering", "accounting"],
    ),
    (
        "{landmark}",
        &[
            "the Eiffel Tower",
            "the Colosseum",
            "Machu Picchu",
            "the Golden Gate Bridge",
        ],
    ),
    (
        "{appliance}",
        &["dishwasher", "furnace", "washing machine", "microwave"],
    ),
    ("{lang}", &["French", "German", "Spanish"]),
    ("{money}", &["3,200", "4,500", "85", "120", "2,750"]),
    ("{n2}", &["16", "32", "64"]),
    ("{n}", &["8", "15", "18", "20"]),
];

const REPLIES: &[&str] = &[
    "Sure! Here are a few ideas you could try, starting with the simplest one.",
    "Great question. The short answer is that it depends, but here is a practical approach.",
    "Happy to help. I'd break it into three steps and adjust as you go.",
    "That's a common problem; most people solve it with a bit of planning up front.",
    "Here's a quick overview, and let me know if you want more detail on any part.",
];

/// The generator's state: a seeded stream and the instance being built.
struct Gen {
    rng: ChaCha8Rng,
    config: ProbeConfig,
}

/// One planted evidence turn: its text and the session it goes in (as an
/// index into the haystack, sessions in date order).
struct Plant {
    text: String,
    session: usize,
}

impl Gen {
    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items.choose(&mut self.rng).copied().unwrap_or("")
    }

    fn filler_turn(&mut self) -> String {
        let mut text = self.pick(FILLER).to_string();
        for (slot, values) in SLOTS {
            while text.contains(slot) {
                let v = self.pick(values);
                text = text.replacen(slot, v, 1);
            }
        }
        text
    }

    /// The evidence as the user says it: sometimes after a lead-in and
    /// before an unrelated request.
    fn wrap(&mut self, statement: &str) -> String {
        let lead = self.pick(LEAD_INS);
        let mut text = if lead.is_empty() {
            statement.to_string()
        } else {
            let mut chars = statement.chars();
            let first = chars.next().map(|c| c.to_lowercase().collect::<String>());
            let keep_case = statement.starts_with("I ") || statement.starts_with("I'");
            match first {
                Some(f) if !keep_case => format!("{lead}{f}{}", chars.as_str()),
                _ => format!("{lead}{statement}"),
            }
        };
        if self.rng.random_bool(0.3) {
            text.push(' ');
            text.push_str(&self.filler_turn());
        }
        text
    }

    /// Distinct session indices in increasing order.
    fn sessions(&mut self, count: usize) -> Vec<usize> {
        let total = self.config.sessions.max(count);
        let mut picked: Vec<usize> = (0..total).collect();
        picked.shuffle(&mut self.rng);
        picked.truncate(count);
        picked.sort_unstable();
        picked
    }

    /// Builds the haystack around the planted turns and returns the
    /// instance (question fields filled by the caller).
    fn haystack(&mut self, id: &str, plants: Vec<Plant>) -> (Instance, Vec<DateTime<Utc>>) {
        let total = self.config.sessions.max(1);
        let day0 = Utc
            .with_ymd_and_hms(2023, 1, 2, 9, 0, 0)
            .single()
            .unwrap_or_default()
            + Duration::days(self.rng.random_range(0..200));
        let mut dates = Vec::with_capacity(total);
        let mut at = day0;
        for _ in 0..total {
            at += Duration::days(self.rng.random_range(1..8))
                + Duration::minutes(self.rng.random_range(0..600));
            dates.push(at);
        }
        let mut sessions = Vec::with_capacity(total);
        let mut ids = Vec::with_capacity(total);
        let mut answer_ids = Vec::new();
        for (s, _) in dates.iter().enumerate() {
            let (lo, hi) = self.config.turns;
            let n = self.rng.random_range(lo.max(1)..hi.max(lo + 1));
            let mut users: Vec<(String, bool)> =
                (0..n).map(|_| (self.filler_turn(), false)).collect();
            let mut evidence_here = false;
            for plant in plants.iter().filter(|p| p.session == s) {
                let at = self.rng.random_range(0..=users.len());
                users.insert(at, (plant.text.clone(), true));
                evidence_here = true;
            }
            let mut turns = Vec::with_capacity(users.len() * 2);
            for (content, evidence) in users {
                turns.push(Turn {
                    role: "user".into(),
                    content,
                    has_answer: evidence.then_some(true),
                });
                turns.push(Turn {
                    role: "assistant".into(),
                    content: self.pick(REPLIES).to_string(),
                    has_answer: None,
                });
            }
            let session_id = if evidence_here {
                format!("answer_{id}_{s}")
            } else {
                format!("{id}_filler_{s}")
            };
            if evidence_here {
                answer_ids.push(session_id.clone());
            }
            ids.push(session_id);
            sessions.push(turns);
        }
        let question_at = at + Duration::days(self.rng.random_range(1..15));
        let instance = Instance {
            question_id: id.to_string(),
            question_type: String::new(),
            question: String::new(),
            answer: serde_json::Value::Null,
            question_date: format_date(question_at),
            haystack_session_ids: ids,
            haystack_dates: dates.iter().map(|d| format_date(*d)).collect(),
            haystack_sessions: sessions,
            answer_session_ids: answer_ids,
        };
        (instance, dates)
    }

    fn finish(mut inst: Instance, kind: &str, question: &str, answer: &str) -> Instance {
        inst.question_type = kind.to_string();
        inst.question = question.to_string();
        inst.answer = serde_json::Value::String(answer.to_string());
        inst
    }

    fn single_session_user(&mut self, id: &str, fact: usize) -> Instance {
        let f = &FACTS[fact % FACTS.len()];
        let value = self.pick(f.values);
        let statement = self.pick(f.statements).replace("{v}", value);
        let session = self.sessions(1)[0];
        let text = self.wrap(&statement);
        let question = self.pick(f.questions);
        let (inst, _) = self.haystack(id, vec![Plant { text, session }]);
        Self::finish(inst, "single-session-user", question, value)
    }

    fn preference(&mut self, id: &str, which: usize) -> Instance {
        let p = &PREFERENCES[which % PREFERENCES.len()];
        let text = {
            let s = self.pick(p.statements);
            self.wrap(s)
        };
        let session = self.sessions(1)[0];
        let question = self.pick(p.questions);
        let (inst, _) = self.haystack(id, vec![Plant { text, session }]);
        Self::finish(inst, "single-session-preference", question, p.answer)
    }

    fn multi_session(&mut self, id: &str, which: usize) -> Instance {
        let t = &TALLIES[which % TALLIES.len()];
        let count = self.rng.random_range(2..=3);
        let mut items: Vec<&str> = t.items.to_vec();
        items.shuffle(&mut self.rng);
        let plants = self
            .sessions(count)
            .into_iter()
            .zip(items)
            .map(|(session, item)| {
                let s = self.pick(t.statements).replace("{v}", item);
                Plant {
                    text: self.wrap(&s),
                    session,
                }
            })
            .collect();
        let (inst, _) = self.haystack(id, plants);
        Self::finish(inst, "multi-session", t.question, &count.to_string())
    }

    fn knowledge_update(&mut self, id: &str, which: usize) -> Instance {
        let u = &UPDATES[which % UPDATES.len()];
        let mut values: Vec<&str> = u.values.to_vec();
        values.shuffle(&mut self.rng);
        let (old, new) = (values[0], values[1 % values.len()]);
        let sessions = self.sessions(2);
        let plants = vec![
            Plant {
                text: self.wrap(&u.before.replace("{v}", old)),
                session: sessions[0],
            },
            Plant {
                text: self.wrap(&u.after.replace("{v}", new)),
                session: sessions[1],
            },
        ];
        let (inst, _) = self.haystack(id, plants);
        Self::finish(inst, "knowledge-update", u.question, new)
    }

    fn temporal(&mut self, id: &str, which: usize) -> Instance {
        let first = &EVENTS[which % EVENTS.len()];
        if which.is_multiple_of(2) {
            let session = self.sessions(1)[0];
            let text = self.wrap(first.statement);
            let (inst, dates) = self.haystack(id, vec![Plant { text, session }]);
            let asked = crate::longmemeval::parse_date(&inst.question_date).unwrap_or_default();
            let days = (asked.date_naive() - dates[session].date_naive()).num_days();
            let question = format!("How many days ago did I {}?", first.paraphrase);
            return Self::finish(inst, "temporal-reasoning", &question, &days.to_string());
        }
        let second = &EVENTS[(which + 3) % EVENTS.len()];
        let sessions = self.sessions(2);
        let plants = vec![
            Plant {
                text: self.wrap(first.statement),
                session: sessions[0],
            },
            Plant {
                text: self.wrap(second.statement),
                session: sessions[1],
            },
        ];
        let (inst, _) = self.haystack(id, plants);
        let (a, b) = if self.rng.random_bool(0.5) {
            (first, second)
        } else {
            (second, first)
        };
        let question = format!(
            "Which happened first, did I {} or {}?",
            a.paraphrase, b.paraphrase
        );
        Self::finish(inst, "temporal-reasoning", &question, first.paraphrase)
    }

    /// A question about a fact that is nowhere in the haystack. The
    /// haystack still holds other evidence-style personal turns, so the
    /// question cannot be told apart by "is there anything personal here".
    fn abstention(&mut self, id: &str, which: usize) -> Instance {
        let planted = which % FACTS.len();
        let asked = (planted + 1 + which / FACTS.len() % (FACTS.len() - 1)) % FACTS.len();
        let f = &FACTS[planted];
        let value = self.pick(f.values);
        let text = {
            let s = self.pick(f.statements).replace("{v}", value);
            self.wrap(&s)
        };
        let session = self.sessions(1)[0];
        let (mut inst, _) = self.haystack(id, vec![Plant { text, session }]);
        // The planted turn is a decoy, not evidence for this question.
        for turn in inst.haystack_sessions.iter_mut().flatten() {
            turn.has_answer = None;
        }
        inst.answer_session_ids.clear();
        let question = self.pick(FACTS[asked].questions);
        Self::finish(
            inst,
            "single-session-user",
            question,
            "The conversation never mentions this.",
        )
    }
}

/// Builds one instance of a type: (generator, question id, variant).
type MakeInstance = fn(&mut Gen, &str, usize) -> Instance;

/// Generates `6 × per_type` instances: five answerable types, then as many
/// abstention instances.
///
/// ```
/// use recall_datasets::probes::{ProbeConfig, generate};
/// let config = ProbeConfig { per_type: 2, ..ProbeConfig::default() };
/// let probes = generate(&config);
/// assert_eq!(probes.len(), 12);
/// assert_eq!(probes, generate(&config));
/// assert_eq!(probes.iter().filter(|p| p.is_abstention()).count(), 2);
/// ```
pub fn generate(config: &ProbeConfig) -> Vec<Instance> {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(config.seed),
        config: *config,
    };
    let mut out = Vec::with_capacity(config.per_type * 6);
    let kinds: [(&str, MakeInstance); 5] = [
        ("ssu", Gen::single_session_user),
        ("pref", Gen::preference),
        ("multi", Gen::multi_session),
        ("ku", Gen::knowledge_update),
        ("temporal", Gen::temporal),
    ];
    for (tag, make) in kinds {
        for i in 0..config.per_type {
            let id = format!("probe_{tag}_{i:03}");
            out.push(make(&mut g, &id, i));
        }
    }
    for i in 0..config.per_type {
        let id = format!("probe_ssu_{i:03}_abs");
        out.push(g.abstention(&id, i));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answerable_probe_plants_its_evidence_and_abstention_plants_none() {
        let probes = generate(&ProbeConfig {
            per_type: 8,
            ..ProbeConfig::default()
        });
        for p in &probes {
            let evidence: Vec<&Turn> = p
                .haystack_sessions
                .iter()
                .flatten()
                .filter(|t| t.is_evidence())
                .collect();
            if p.is_abstention() {
                assert!(evidence.is_empty(), "{}", p.question_id);
                assert!(p.answer_session_ids.is_empty());
                continue;
            }
            let expected = match p.question_type.as_str() {
                "knowledge-update" => 2..=2,
                "multi-session" => 2..=3,
                "temporal-reasoning" => 1..=2,
                _ => 1..=1,
            };
            assert!(
                expected.contains(&evidence.len()),
                "{}: {}",
                p.question_id,
                evidence.len()
            );
            assert!(evidence.iter().all(|t| t.role == "user"));
            assert_eq!(
                p.answer_session_ids.len(),
                evidence.len(),
                "{}",
                p.question_id
            );
        }
    }

    #[test]
    fn evidence_positions_and_dates_vary() {
        let probes = generate(&ProbeConfig {
            per_type: 10,
            ..ProbeConfig::default()
        });
        let mut positions = std::collections::HashSet::new();
        for p in probes.iter().filter(|p| !p.is_abstention()) {
            for (s, session) in p.haystack_sessions.iter().enumerate() {
                for (t, turn) in session.iter().enumerate() {
                    if turn.is_evidence() {
                        positions.insert((s, t / 2));
                    }
                }
            }
            let dates: Vec<_> = p
                .haystack_dates
                .iter()
                .map(|d| crate::longmemeval::parse_date(d).unwrap())
                .collect();
            assert!(dates.windows(2).all(|w| w[0] < w[1]));
            assert!(
                crate::longmemeval::parse_date(&p.question_date).unwrap() > dates[dates.len() - 1]
            );
        }
        assert!(
            positions.len() > 20,
            "only {} distinct positions",
            positions.len()
        );
    }

    #[test]
    fn knowledge_updates_put_the_new_value_in_the_later_session() {
        for p in generate(&ProbeConfig::default())
            .iter()
            .filter(|p| p.question_type == "knowledge-update")
        {
            let answer = p.answer.as_str().unwrap();
            let last = p
                .haystack_sessions
                .iter()
                .flatten()
                .rfind(|t| t.is_evidence())
                .unwrap();
            assert!(
                last.content.contains(answer),
                "{}: {}",
                p.question_id,
                last.content
            );
        }
    }
}

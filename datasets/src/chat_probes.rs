//! A second, independent seeded generator of LongMemEval-format probes:
//! a held-out set that shares nothing with [`crate::probes`] but the
//! output format ([`crate::longmemeval`]) and the question types.
//!
//! [`crate::probes`] is what the team tunes against. Everything here is
//! written separately so that a ranker tuned on those probes cannot lean
//! on their wording: no template, filler text, name, value, reply or
//! question pattern of [`crate::probes`] is reused (the unit tests read
//! `probes.rs` and check). It is also different in kind:
//!
//! - Evidence is said the way people type into a chat: long rambling
//!   messages with the fact in a subordinate clause, numbered lists,
//!   questions with an embedded statement, lower-case texting.
//! - Filler turns mix a request with incidental statements about third
//!   parties ("… Ravi swears that …"), so they look statement-like too and
//!   "is this a personal statement" does not separate evidence from noise.
//! - Preferences are stated indirectly (a complaint, a habit), and the
//!   question asks for a recommendation the preference should shape.
//! - Knowledge updates restate the new value in a different sentence
//!   shape from the old one, typically months later (sessions are 2–3
//!   weeks apart, the old value in the first half of the haystack and the
//!   new one in the second).
//! - `multi-session` questions count related events or add up amounts
//!   (dollars, kilometres) across 2–3 sessions.
//! - `temporal-reasoning` asks for days elapsed since an event, which of
//!   two events came first, or the days between two events.
//! - Abstention (`_abs` on `question_id`, `question_type` the base type, no
//!   `has_answer` turn, empty `answer_session_ids`) asks something *near* a
//!   topic the user did talk about: the haystack holds a turn about the
//!   brother's job and the question asks about the cousin's; the user
//!   mentions a trip to Porto and the question asks for the hotel in
//!   Seville. The right retrieval is nothing.
//!
//! The layout matches [`crate::probes::generate`]: `6 × per_type`
//! instances, the five answerable types in order, then the abstention
//! instances. Same seed, same file.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::longmemeval::{Instance, Turn, format_date, parse_date};

/// How many chat probes and how big their haystacks are (the same knobs
/// as [`crate::probes::ProbeConfig`], another default seed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChatProbeConfig {
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

impl Default for ChatProbeConfig {
    fn default() -> Self {
        ChatProbeConfig {
            seed: 11,
            per_type: 20,
            sessions: 10,
            turns: (3, 7),
        }
    }
}

/// Marks where a value goes in a template.
const VALUE: &str = "<v>";
/// Marks where an amount goes in a tally template.
const AMOUNT: &str = "<n>";

/// A personal fact: ways of letting it slip, ways of asking it back.
struct Fact {
    values: &'static [&'static str],
    said: &'static [&'static str],
    asked: &'static [&'static str],
}

const FACTS: &[Fact] = &[
    Fact {
        values: &[
            "crane operator",
            "court stenographer",
            "commercial beekeeper",
            "air traffic controller",
            "piano tuner",
        ],
        said: &[
            "so my brother, who has been a <v> for almost six years now and still moans about the hours, is coming to stay next week - can you suggest things to do with a grown man who hates museums?",
            "lol my brother the <v> just phoned to ask me how to defrost a freezer. thirty four years old",
            "Things to sort before the holidays: 1) find someone to water the garden 2) a present for my brother, ideally something a <v> would actually use at work 3) fix the gutter. Where do I start?",
        ],
        asked: &[
            "Remind me, what line of work is my brother in?",
            "do you remember what my brother does for a job?",
        ],
    },
    Fact {
        values: &[
            "marine biology",
            "medieval history",
            "civil engineering",
            "linguistics",
            "agricultural economics",
        ],
        said: &[
            "Back when I was doing my degree in <v> I never imagined I'd end up selling insurance, but here we are; could you help me rewrite my profile headline?",
            "is it weird that I still dream about exams? I graduated in <v> ages ago",
            "Honestly, what use is a <v> degree these days, when every job ad I scroll past wants five years of sales experience?",
        ],
        asked: &[
            "What subject did I study at university?",
            "quick one: what was my degree in?",
        ],
    },
    Fact {
        values: &[
            "sage green",
            "terracotta",
            "deep navy",
            "butter yellow",
            "dusty pink",
        ],
        said: &[
            "We spent the whole weekend painting the kitchen <v>, and although my arms are wrecked, I love how it looks next to the oak shelves.",
            "the kitchen is <v> now!! took three coats. what colour tiles would go with it",
        ],
        asked: &[
            "What colour is our kitchen now?",
            "Do you remember which shade we went with for the kitchen walls?",
        ],
    },
    Fact {
        values: &["O negative", "A positive", "B negative", "AB positive"],
        said: &[
            "The blood bank keeps texting me because I'm <v>, which apparently is always in short supply - is it safe to donate every eight weeks?",
            "donated blood at lunch, they told me I'm <v>, never knew that. got a free flapjack tho",
        ],
        asked: &[
            "What's my blood type?",
            "Which blood group did the donation centre say I have?",
        ],
    },
    Fact {
        values: &["goalkeeper", "left winger", "centre back", "striker"],
        said: &[
            "My son's coach has him playing <v> this season, which he's thrilled about, though I have no idea what drills he should practise at home - any thoughts?",
            "Saturday mornings are officially football mornings now: Theo plays <v> for the under-10s while I stand in the cold with a flask.",
        ],
        asked: &[
            "What position does my son play on his football team?",
            "Where on the pitch does my boy play?",
        ],
    },
    Fact {
        values: &[
            "a lighthouse",
            "a red fox",
            "a compass rose",
            "a hummingbird",
            "a paper crane",
        ],
        said: &[
            "got <v> tattooed on my forearm yesterday, it stings like crazy. how do I look after it the first week?",
            "After years of chickening out I finally let the artist put <v> on my left wrist, and my mother has not stopped sending disapproving emojis.",
        ],
        asked: &[
            "What design did I get for my tattoo?",
            "what's the new ink on my arm again?",
        ],
    },
    Fact {
        values: &["Sheldon", "Admiral Crumble", "Pebbles", "Tank", "Gertrude"],
        said: &[
            "Our tortoise, <v>, who is older than I am if you believe the previous owner, got out under the fence again; how do I tortoise-proof a garden?",
            "<v> (the tortoise) has decided lettuce is beneath him. what else can tortoises eat",
        ],
        asked: &[
            "What's our tortoise called?",
            "Remind me of the name of the tortoise we have.",
        ],
    },
    Fact {
        values: &["Ingrid", "Olusegun", "Haruki", "Beatriz", "Siobhan"],
        said: &[
            "My physio <v> says the shoulder needs another month, so is there any upper-body exercise I can still do that won't annoy it?",
            "I've been seeing a physiotherapist called <v> twice a week since the shoulder thing, and it is brutal but it's working.",
        ],
        asked: &[
            "Who is the physiotherapist treating my shoulder?",
            "What was the name of my physio again?",
        ],
    },
    Fact {
        values: &[
            "Casa da Ribeira",
            "the Vinha Guesthouse",
            "Hotel Miradouro",
            "the Azulejo Suites",
        ],
        said: &[
            "We've booked four nights at <v> in Porto for May, and since neither of us speaks the language, which phrases should we learn before we go?",
            "porto trip is locked in!! we're staying at <v>, right by the river",
        ],
        asked: &[
            "Which hotel did we book for Porto?",
            "Where are we sleeping when we're in Porto?",
        ],
    },
    Fact {
        values: &[
            "The Static Owls",
            "Velvet Tractor",
            "Half Past Noon",
            "Mild Peril",
        ],
        said: &[
            "I play bass in a covers band called <v>, and we've landed our first paid gig at a wedding - what songs never fail to get people dancing?",
            "rehearsal tonight w/ <v>, our drummer is late AGAIN",
        ],
        asked: &[
            "What's the name of the band I play in?",
            "what are we called, my band?",
        ],
    },
    Fact {
        values: &["Tralee", "Ravenna", "Gdansk", "Trabzon", "Tromso"],
        said: &[
            "My grandmother grew up in <v> and keeps telling stories about it; I'd love to take her back there next summer, but what would a trip like that need, given she's 88?",
            "nana was born in <v> and refuses to believe anywhere else makes decent bread",
        ],
        asked: &[
            "Where is my grandmother originally from?",
            "Which town did my nana grow up in?",
        ],
    },
    Fact {
        values: &[
            "a Fujifilm X100V",
            "a Pentax K1000",
            "a Canon AE-1",
            "a Sony a6400",
        ],
        said: &[
            "Is there a good beginner course for street photography? I bought <v> secondhand last month and mostly take blurry pictures of pigeons.",
            "new toy: <v>. yes I know I have a phone. no I don't care.",
        ],
        asked: &[
            "Which camera did I buy?",
            "What camera am I shooting with these days?",
        ],
    },
    Fact {
        values: &[
            "the hospice on Elm Street",
            "the seed library",
            "a community radio station",
            "the adult literacy centre",
        ],
        said: &[
            "Saturdays I volunteer at <v>, which I started after my dad passed and which has become the best part of my week; how do I ask my boss for a volunteering day?",
            "can't do brunch sat, I'm at <v> till 2, volunteering",
        ],
        asked: &[
            "Where do I volunteer on weekends?",
            "What organisation do I give my Saturdays to?",
        ],
    },
    Fact {
        values: &["Marigold", "Second Wind", "Duckling", "Slow Poke"],
        said: &[
            "We named the canoe <v>, painted it on the side and everything, and took it out on the reservoir - what safety gear should always be on board?",
            "the canoe is officially called <v>, the kids voted, democracy was a mistake",
        ],
        asked: &[
            "What did we name our canoe?",
            "What's painted on the side of the canoe?",
        ],
    },
];

/// A preference let slip indirectly, and requests it should shape.
struct Preference {
    said: &'static [&'static str],
    asked: &'static [&'static str],
    answer: &'static str,
}

const PREFERENCES: &[Preference] = &[
    Preference {
        said: &[
            "ugh, every time a tutorial opens with a Java class full of getters and setters I zone out, Kotlin just reads like something a human wrote",
            "After a week of trying both, I'd honestly rather never see another Java null check again; Kotlin is the first JVM language that didn't make me want to quit.",
        ],
        asked: &[
            "Which language should I use for the Android app I'm starting?",
            "Can you suggest a stack for a small mobile side project?",
        ],
        answer: "Kotlin rather than Java.",
    },
    Preference {
        said: &[
            "why does every taco place drown things in coriander, it tastes like washing-up liquid to me and ruins the plate",
            "My partner adores cilantro, but for me a single leaf makes everything taste of soap, so we've more or less stopped eating out at Mexican places.",
        ],
        asked: &[
            "Give me a salsa recipe for taco night.",
            "What should I make for a Mexican-themed dinner party?",
        ],
        answer: "Dishes and salsas made without cilantro.",
    },
    Preference {
        said: &[
            "on the flight back I got stuck on the aisle and spent six hours leaning over a stranger to see the clouds, never again",
            "Part of the fun of flying for me, which my husband has never understood, is watching the ground slide by out the window the entire time.",
        ],
        asked: &[
            "Any tips for picking seats on my flight to Reykjavik?",
            "I'm booking a long-haul trip, what should I look out for when I choose where to sit?",
        ],
        answer: "A window seat.",
    },
    Preference {
        said: &[
            "Game nights at our place always end in a sulk whenever somebody wins, which is why the ones where we all play against the board are the only games left on the shelf.",
            "tbh I hate games where you backstab your friends, all of us teaming up against the game is way more fun",
        ],
        asked: &[
            "What board game should I buy for Saturday's game night?",
            "Recommend a tabletop game for a group of six adults.",
        ],
        answer: "A cooperative board game, not a competitive one.",
    },
    Preference {
        said: &[
            "Lyrics hijack my brain whenever I'm trying to write, so it's post-rock and film scores in the headphones or nothing.",
            "cant focus if someone is singing, even in a language I dont know, so instrumental only when I work",
        ],
        asked: &[
            "Make me a playlist for a long writing session.",
            "What should I listen to while I draft the next chapter of my novel?",
        ],
        answer: "Instrumental music such as post-rock or film scores, nothing with lyrics.",
    },
    Preference {
        said: &[
            "Past eight in the evening my brain basically clocks out, whereas at six in the morning I'm unstoppable.",
            "my best thinking happens before breakfast; anything scheduled after dinner I just sleepwalk through",
        ],
        asked: &[
            "When should I block out time to study for my certification exam?",
            "Help me plan a daily routine for learning to code.",
        ],
        answer: "Early mornings, not late evenings.",
    },
    Preference {
        said: &[
            "the beach sounds like torture to me honestly, I burn in ten minutes and get cranky in the heat, give me fjords and a wool jumper",
            "Whenever a trip involves temperatures above twenty-five degrees I end up miserable, so I keep gravitating to places where you need a coat in July.",
        ],
        asked: &[
            "Where should we go for our honeymoon?",
            "Suggest somewhere for a week off in August.",
        ],
        answer: "A cool-climate destination, not a hot beach.",
    },
    Preference {
        said: &[
            "The hotter the better, honestly; I put chili crisp on scrambled tofu and still reach for the chili flakes.",
            "if my nose isn't running by the end of a meal, what was even the point",
        ],
        asked: &[
            "What should I order at the Thai place tonight?",
            "Pick a curry for me to cook this weekend.",
        ],
        answer: "Something very spicy.",
    },
    Preference {
        said: &[
            "Anything that needs watering more than once a fortnight dies on my watch, especially since I'm away for work every other week.",
            "i've killed three basil plants this year by forgetting about them. stuff that thrives on neglect = my kind of greenery",
        ],
        asked: &[
            "What should I grow on my balcony?",
            "Recommend a few plants for my flat.",
        ],
        answer: "Low-maintenance, drought-tolerant plants such as succulents.",
    },
    Preference {
        said: &[
            "After staring at spreadsheets all day my eyes are done, so reading at night is out, but I'll happily listen to someone narrate while I wash up.",
            "paper books put me to sleep in 5 min but give me a voice in my ears on the walk to work and I'm hooked",
        ],
        asked: &[
            "How can I get through more books this year?",
            "Any suggestions for keeping up with my reading list?",
        ],
        answer: "Audiobooks rather than print or screens.",
    },
];

/// What a multi-session question aggregates.
#[derive(Clone, Copy)]
enum Total {
    /// How many events.
    Count,
    /// The sum of the amounts, in dollars.
    Dollars,
    /// The sum of the amounts, in kilometres.
    Kilometres,
}

/// Related events across sessions, counted or summed.
struct Tally {
    /// An item and its amount (ignored for [`Total::Count`]).
    items: &'static [(&'static str, u32)],
    said: &'static [&'static str],
    asked: &'static [&'static str],
    total: Total,
}

const TALLIES: &[Tally] = &[
    Tally {
        items: &[
            ("the vaccinations", 95),
            ("a torn dewclaw", 180),
            ("a dental clean", 240),
            ("an ear infection", 70),
            ("the yearly check-up", 60),
        ],
        said: &[
            "the vet charged us $<n> for <v> today, this cat is going to bankrupt me",
            "Is pet insurance worth it? I'm asking because I just paid $<n> at the vet for <v> and it feels like it keeps happening.",
        ],
        asked: &[
            "Add up what I've paid the vet lately - what's the total?",
            "How much have the cat's vet visits cost me altogether?",
        ],
        total: Total::Dollars,
    },
    Tally {
        items: &[
            ("Ghana", 0),
            ("Vietnam", 0),
            ("Chile", 0),
            ("Norway", 0),
            ("Morocco", 0),
        ],
        said: &[
            "Just landed back from <v> after the client workshop and I have no idea what day it is - how do I beat jet lag fast?",
            "work sent me to <v> this week, hotel wifi is a joke",
        ],
        asked: &[
            "How many different countries has work sent me to recently?",
            "Count the countries I've flown to for my job lately.",
        ],
        total: Total::Count,
    },
    Tally {
        items: &[
            ("a logistics company", 0),
            ("a natural history museum", 0),
            ("an ad agency", 0),
            ("a hospital network", 0),
            ("a regional airline", 0),
        ],
        said: &[
            "Had an interview with <v> this morning and I think I rambled; what's a good way to follow up?",
            "interview #whatever done, this time with <v>. they asked my greatest weakness. I said interviews.",
        ],
        asked: &[
            "How many job interviews have I gone to so far?",
            "In total, how many employers have interviewed me during this job hunt?",
        ],
        total: Total::Count,
    },
    Tally {
        items: &[
            ("the coast road", 42),
            ("the old railway path", 65),
            ("the hill loop", 38),
            ("the canal towpath", 54),
        ],
        said: &[
            "Rode <n> km along <v> this morning and my legs are jelly, is a recovery shake actually worth it?",
            "<n>k on <v> today!! new favourite route. any tips for a sore backside lol",
        ],
        asked: &[
            "How many kilometres have I cycled altogether on these weekend rides?",
            "What's the combined distance of my recent rides?",
        ],
        total: Total::Kilometres,
    },
    Tally {
        items: &[
            ("shakshuka", 0),
            ("pad see ew", 0),
            ("mole poblano", 0),
            ("pierogi", 0),
            ("bibimbap", 0),
        ],
        said: &[
            "Tried <v> from the new cookbook tonight; the recipe claimed forty minutes and it took me two hours.",
            "cookbook challenge update: made <v>. kitchen destroyed, family fed",
        ],
        asked: &[
            "How many recipes from my new cookbook have I made?",
            "So far, how many dishes have I cooked out of that cookbook?",
        ],
        total: Total::Count,
    },
    Tally {
        items: &[
            ("the submarine one", 0),
            ("the haunted library", 0),
            ("the bank heist room", 0),
            ("the pharaoh's tomb", 0),
            ("the space station", 0),
        ],
        said: &[
            "we did <v> at the escape room place tonight and got out with 3 minutes left!!",
            "Our office team-building thing was an escape room, <v>, and as far as I could tell I was the only one who read the clues properly.",
        ],
        asked: &[
            "How many escape rooms have I done recently?",
            "What's my escape room count at this point?",
        ],
        total: Total::Count,
    },
    Tally {
        items: &[
            ("the old armchair", 45),
            ("a crate of vinyl records", 30),
            ("the kids' bunk bed", 110),
            ("my rowing machine", 150),
        ],
        said: &[
            "Sold <v> on the marketplace app for $<n>, and the buyer didn't even haggle - what should I list next?",
            "another thing gone from the garage: <v>, $<n>, cash",
        ],
        asked: &[
            "How much money have I made selling stuff from the garage so far?",
            "What have my garage clear-out sales brought in, in total?",
        ],
        total: Total::Dollars,
    },
];

/// A value that changes: how it was first said and how the change is
/// said later, in a different sentence shape.
struct Update {
    values: &'static [&'static str],
    /// Whether the new value must come after the old one in `values`
    /// (a record only goes up).
    ordered: bool,
    before: &'static [&'static str],
    after: &'static [&'static str],
    asked: &'static [&'static str],
}

const UPDATES: &[Update] = &[
    Update {
        values: &["nights", "early mornings", "evenings", "split shifts"],
        ordered: false,
        before: &[
            "the depot has me on <v> at the moment, so if I sound half asleep that's why",
            "I'm working <v> at the depot for the foreseeable future, which makes seeing friends tricky.",
        ],
        after: &[
            "Since they shuffled the rota and put me on <v>, my whole body clock has had to start over.",
            "new rota dropped: it's <v> for me from now on. my cat is confused",
        ],
        asked: &[
            "Which shift am I working now?",
            "What hours does the depot have me on these days?",
        ],
    },
    Update {
        values: &["V3", "V4", "V5", "V6"],
        ordered: true,
        before: &[
            "Still can't get past <v> at the climbing gym, my fingers just give up halfway.",
            "bouldering update: stuck on <v> problems for a month now",
        ],
        after: &[
            "guess who finally topped a <v> on tuesday after weeks of peeling off the last hold",
            "The setters must have been feeling generous, because I sent my first <v> last night and screamed a little.",
        ],
        asked: &[
            "What's the hardest bouldering grade I've managed so far?",
            "How hard do I climb now?",
        ],
    },
    Update {
        values: &["nine", "twelve", "seventeen", "twenty-two"],
        ordered: false,
        before: &[
            "I manage a team of <v> people at the moment, which is about as many as I can mentor properly.",
            "my team is <v> people, small enough that we all fit in one booth at lunch",
        ],
        after: &[
            "after the reorg I somehow have <v> direct reports, so standups now drag on forever",
            "Headcount changed again - there are <v> of us on the team since the merger, and I've lost track of birthdays.",
        ],
        asked: &[
            "How many people are on the team I manage now?",
            "What's my current headcount at work?",
        ],
    },
    Update {
        values: &["3.9%", "4.4%", "5.2%", "6.1%"],
        ordered: false,
        before: &[
            "Our mortgage is fixed at <v> until the spring, which seemed steep when we signed.",
            "we're paying <v> on the house loan right now",
        ],
        after: &[
            "The bank came back with <v> when we remortgaged, and I've never been so happy about a letter.",
            "remortgage done!! new rate <v>, signed it on the kitchen table",
        ],
        asked: &[
            "What interest rate are we paying on the house at this point?",
            "What's the current rate on our home loan?",
        ],
    },
    Update {
        values: &[
            "the Crooked Spoon",
            "Bramble and Bean",
            "the Lantern Room",
            "Cafe Mirabel",
        ],
        ordered: false,
        before: &[
            "Writing group is every Thursday at <v>, and we always claim the big table by the window.",
            "off to <v> for writing group, wish me words",
        ],
        after: &[
            "We got politely asked to leave for being too loud, so writing group has migrated to <v> - better scones anyway.",
            "new HQ for the writers: <v>. same Thursdays, worse parking",
        ],
        asked: &[
            "Where does my writing group get together these days?",
            "Which cafe hosts my writing group now?",
        ],
    },
    Update {
        values: &["95 kg", "110 kg", "125 kg", "140 kg"],
        ordered: true,
        before: &[
            "my deadlift max is stuck at <v>, same as it was in march",
            "For months my heaviest deadlift has been <v>, and my coach says my hip hinge is the problem.",
        ],
        after: &[
            "Pulled <v> off the floor this morning and the whole gym clapped, I nearly cried.",
            "new PR!!! <v> deadlift. back is fine. mostly.",
        ],
        asked: &[
            "What's my heaviest deadlift now?",
            "How much can I deadlift at this point?",
        ],
    },
    Update {
        values: &["Anneke", "Yusuf", "Keoni", "Fenna"],
        ordered: false,
        before: &[
            "<v> drives the carpool to the site most mornings, which means I get to nap.",
            "carpool this month = <v> driving, me in the back with coffee",
        ],
        after: &[
            "Carpool shake-up: the old driver moved away, so <v> has the keys now and plays nothing but sea shanties.",
            "guess who's driving us to work now - <v>. pray for me",
        ],
        asked: &[
            "Who's doing the driving for my carpool now?",
            "Who takes the wheel on the way to the site these days?",
        ],
    },
];

/// An event dated by the session it is told in ("today", "this
/// morning"), and how a question refers to it.
struct Event {
    said: &'static [&'static str],
    /// A clause: "the day <clause>", "since <clause>".
    clause: &'static str,
}

const EVENTS: &[Event] = &[
    Event {
        said: &[
            "my sister-in-law had the baby at 4am!! a girl, 3.2 kilos, I'm officially an auntie",
            "Somewhat bleary today because my brother-in-law rang at dawn to say the baby had arrived, a little girl - what's a good gift for new parents?",
        ],
        clause: "my niece was born",
    },
    Event {
        said: &[
            "The nurse took my stitches out this morning and the scar is smaller than I feared.",
            "stitches OUT today. finally can shower like a normal person",
        ],
        clause: "I got my stitches out",
    },
    Event {
        said: &[
            "The roofers turned up at seven today and started tearing off the old tiles, so I'm working from the library.",
            "roofers arrived this morning, the noise is unreal, hammering right above my desk",
        ],
        clause: "the roofers started on our roof",
    },
    Event {
        said: &[
            "Today I handed my boss my resignation letter, which felt terrifying and amazing at once.",
            "did it. resigned this morning. 4 weeks then I'm free",
        ],
        clause: "I quit my job",
    },
    Event {
        said: &[
            "We planted the two apple trees in the back garden this afternoon, although the soil was mostly clay.",
            "apple trees are in the ground!! took all afternoon. how often do I water saplings?",
        ],
        clause: "we planted the apple trees",
    },
    Event {
        said: &[
            "My citizenship interview was this morning and the officer only asked me four of the civics questions.",
            "citizenship interview done today, think it went ok?? they'll post the decision",
        ],
        clause: "I had my citizenship interview",
    },
    Event {
        said: &[
            "Water came up through the basement floor this morning and we spent the whole day bailing it out with buckets.",
            "basement flooded today. everything on the floor is ruined. do I call insurance first or a plumber",
        ],
        clause: "our basement flooded",
    },
    Event {
        said: &[
            "A couple from the next town came and took away my old upright piano today, and the living room echoes now.",
            "piano sold!! the movers needed four guys and a ramp. today was a lot",
        ],
        clause: "I sold my old piano",
    },
];

const SINCE: &[&str] = &[
    "Exactly how many days have passed since <a>?",
    "Counting from the day <a>, how many days is it until now?",
];

const EARLIER: &[&str] = &[
    "Which was earlier: the day <a>, or the day <b>?",
    "Did it come first that <a>, or that <b>?",
];

const BETWEEN: &[&str] = &[
    "How many days separated the day <a> from the day <b>?",
    "What was the gap in days between when <a> and when <b>?",
];

/// A turn near a topic, and a question it does not answer.
struct NearMiss {
    /// The base question type the question poses as.
    kind: &'static str,
    said: &'static [&'static str],
    asked: &'static [&'static str],
}

const NEAR_MISSES: &[NearMiss] = &[
    NearMiss {
        kind: "single-session-user",
        said: &[
            "My brother got promoted to shift supervisor at the bottling plant and is now unbearable about it - what's a funny card message?",
            "my brother's new job at the bottling plant has him up at 4am lol",
        ],
        asked: &[
            "What does my cousin do for a living?",
            "Remind me where my cousin works.",
        ],
    },
    NearMiss {
        kind: "single-session-user",
        said: &[
            "porto in may!! four nights, mostly for the port cellars and the tiles",
            "We're finally doing Porto in the spring, and I intend to eat my way along the whole riverfront.",
        ],
        asked: &[
            "Which hotel did we book in Seville?",
            "What's the name of the place we're staying at in Seville?",
        ],
    },
    NearMiss {
        kind: "single-session-user",
        said: &[
            "The kids next door keep feeding lettuce over the fence to our tortoise, and honestly he loves the attention.",
        ],
        asked: &[
            "What is my neighbour's dog called?",
            "What did the people next door name their puppy?",
        ],
    },
    NearMiss {
        kind: "single-session-user",
        said: &[
            "The kitchen finally got its fresh coat of paint, so next on the list is sanding the hallway floor.",
        ],
        asked: &[
            "What colour did we paint the bedroom?",
            "Which shade did we choose for the bedroom walls?",
        ],
    },
    NearMiss {
        kind: "knowledge-update",
        said: &["deadlifts went ok today, form felt better, coach was almost impressed"],
        asked: &[
            "What's my best bench press these days?",
            "How much can I bench now?",
        ],
    },
    NearMiss {
        kind: "knowledge-update",
        said: &[
            "My team moved up to the fourth floor last week and the coffee machine there is somehow even worse.",
        ],
        asked: &[
            "What's my salary now, after the raise?",
            "How much am I earning at the moment?",
        ],
    },
    NearMiss {
        kind: "temporal-reasoning",
        said: &[
            "My nephew's birthday party is coming up and I still haven't bought anything - ideas for a seven-year-old who loves trains?",
        ],
        asked: &[
            "How many days ago was my nephew christened?",
            "Counting from my nephew's christening, how many days have gone by?",
        ],
    },
    NearMiss {
        kind: "temporal-reasoning",
        said: &[
            "the roofer came round today just to measure up and give us a quote, no actual work yet",
        ],
        asked: &[
            "Which was earlier: the solar panels going on, or the new windows going in?",
            "How many days passed between the solar panels being fitted and the window replacement?",
        ],
    },
    NearMiss {
        kind: "multi-session",
        said: &[
            "Our first ever escape room tonight - the pirate ship one - and we got out with ninety seconds to spare!",
        ],
        asked: &[
            "How many haunted houses have we visited since October?",
            "Count the haunted house attractions I've been to lately.",
        ],
    },
    NearMiss {
        kind: "multi-session",
        said: &[
            "Cleared half the garage at the weekend and honestly I didn't know we owned three broken lamps.",
        ],
        asked: &[
            "How many pieces of furniture have I found at flea markets?",
            "What have I spent in total on flea market finds?",
        ],
    },
    NearMiss {
        kind: "single-session-user",
        said: &[
            "I renewed my passport last month, and the new photo is somehow even worse than the old one.",
        ],
        asked: &[
            "When does my national ID card expire?",
            "What's the expiry date on my ID card?",
        ],
    },
    NearMiss {
        kind: "single-session-user",
        said: &[
            "My physio has me doing resistance band exercises for the shoulder every night before bed.",
        ],
        asked: &[
            "What's the name of my dentist?",
            "Who is the dentist I go to?",
        ],
    },
];

/// Names of third parties in filler (none is a value of a fact).
const FRIENDS: &[&str] = &[
    "Ravi", "Mireille", "Joaquin", "Bongani", "Svetlana", "Aroha", "Declan", "Nnamdi", "Paulina",
    "Kwame", "Ottilie", "Farrukh",
];

/// Towns filler mentions (none is a value of a fact).
const TOWNS: &[&str] = &[
    "Galway",
    "Tbilisi",
    "Hobart",
    "Valparaiso",
    "Bruges",
    "Tallinn",
    "Windhoek",
    "Ljubljana",
];

const FILLER: &[&str] = &[
    "Give me ideas for a wet afternoon with two bored kids - I'm asking for <friend>, whose holiday cottage has no wifi.",
    "<friend> swears that laying a wooden spoon across a pot stops it boiling over; is that actually true or just one of those things?",
    "what's a polite way to tell <friend> I can't make the party, the invite went out weeks ago",
    "Can you explain what an index fund is? <friend> keeps bringing them up at lunch and I just nod along.",
    "The teenager across the road offered to mow lawns for pocket money - what's a fair hourly rate to suggest?",
    "List five conversation starters for a work dinner where I won't know anyone except <friend>.",
    "<friend> is convinced the moon landing footage was shot in a studio. How do I push back gently without falling out?",
    "how long does homemade hummus keep in the fridge? <friend> made a vat of it",
    "I need a birthday message for a coworker I barely know; <friend> says keep it short, but that feels cold.",
    "Could you lay out the main arguments for and against a four-day work week? It came up at the all-hands and <friend> got very heated.",
    "what's the difference between baking soda and baking powder, <friend> used the wrong one and the muffins were tragic",
    "Translate 'the bill, please' into Greek for me - <friend> is heading to Crete and panicking.",
    "Suggest a name for a group chat of old school friends. <friend> made one called 'chat' and it's depressing.",
    "Help me write a complaint about a parcel that never arrived. The courier claims <friend> signed for it, but nobody was home all day.",
    "Why do glasses fog up so badly with a scarf on? <friend> says there's a trick with washing-up liquid.",
    "Three easy card games for a long train ride? <friend> only knows snap.",
    "<friend> told me octopuses have three hearts - is that real?",
    "can u help me figure out a fair way to split a holiday rental between 5 people when one couple gets the big room",
    "I'm writing a few words for the retirement lunch of <friend>'s dad, who worked at the same print shop for forty years. Where do I even begin?",
    "Explain the offside rule like I'm five. <friend> tried last night and I understood even less.",
    "How do I get candle wax out of a tablecloth? <friend> knocked one over at dinner.",
    "Recommend a documentary about deep-sea creatures. <friend> and I are doing a nature night.",
    "what should I bring to a potluck if I can't cook? asking because <friend> volunteered me without asking",
    "Draft a short note to the school office about a missed Friday; <friend> says they're strict about absences.",
    "Is it rude to bring shop-bought dessert to a dinner party? <friend> thinks so, I think it's fine.",
    "Things to check before signing a gym contract - <friend> got locked into a two-year one by accident.",
    "How many cups of flour are in a kilo, roughly? The recipe <friend> sent is all in grams.",
    "Give me some fun facts about <town> for a quiz night. <friend> is hosting and the round is cities nobody visits.",
    "what time zone is <town> in? <friend> keeps calling me at 3am from there",
    "Write me a packing list for a weekend in <town>; <friend> says it's windy all year round.",
    "I'm giving a speech at <friend>'s leaving do - any tips for keeping it under three minutes?",
    "Why do cats knock things off tables? <friend>'s cat has broken four mugs this month.",
    "Can you recommend a beginner-friendly crossword app? <friend> does the cryptic one every morning and I feel left out.",
    "What's the etiquette for tipping a hairdresser who also owns the salon? <friend> says you don't.",
    "how do you politely decline a pyramid-scheme invite, <friend> keeps sending me 'business opportunities'",
    "Compare a few ways to back up family photos, because <friend> lost ten years of pictures when an old laptop died.",
    "What's a good reason to leave a party early that isn't a lie? <friend> always catches me out.",
    "Suggest a weekend project for a teenager who is into electronics - <friend>'s son built a radio last summer.",
    "is it ok to freeze cooked pasta? <friend> does it and swears by it",
    "How do I persuade a landlord to let me put up shelves? <friend> got permission by offering to repaint on moving out.",
    "Write me a limerick about a grumpy goose; <friend> was chased by one at the park and it deserves commemorating.",
    "Why does bread go stale faster in the fridge? <friend> keeps a loaf in there and I'm appalled.",
    "Make me a checklist for hosting overnight guests, since <friend> and the twins are staying next week.",
    "which is cheaper long term, a heat pump or gas heating? <friend> just got a heat pump and won't shut up about it",
    "Teach me a simple magic trick with a coin; <friend>'s kid thinks I'm boring.",
    "I'm trying to understand how credit scores work; <friend> got turned down for a car loan and nobody can explain why.",
    "Any tricks for falling asleep on a plane? <friend> takes melatonin but I'm not sure about that.",
    "Shopping list check: oat milk, bin bags, batteries, a card for <friend>. What am I forgetting for a camping weekend?",
    "Three questions: 1) does vinegar really clean windows 2) is newspaper better than a cloth 3) why does <friend> insist on doing it at night?",
    "ok random but <friend> says <town> has the best street food in the world, is that a real claim or are they just biased",
];

/// Filler slots and their values.
const FILLER_SLOTS: &[(&str, &[&str])] = &[("<friend>", FRIENDS), ("<town>", TOWNS)];

const REPLIES: &[&str] = &[
    "Good thinking to ask ahead. A couple of options, roughly from least to most effort:",
    "Ha, that sounds like quite a week. Here's what I'd suggest.",
    "Let's sort that out. First, a quick question back: how much time do you have?",
    "Short version: yes, mostly. Longer version below if you're curious.",
    "I can help with that. Here's a draft you can tweak to sound more like you.",
    "That one trips a lot of people up, so don't feel bad. The key idea is this.",
    "Okay! I'll keep it brief and practical.",
    "There isn't a single right answer, but here are the trade-offs as I see them.",
    "Oof, sorry to hear that. Here's a calm step-by-step plan.",
    "Fun question. A few that people tend to enjoy:",
    "Of course - I'll list them in order of how often they work.",
    "Noted. Here's a version that should land well with your audience.",
    "Interesting! The science behind it is simpler than it sounds.",
    "Let me walk through it with an example, which usually makes it click.",
    "Sounds stressful. Two things to do today, and one that can wait.",
    "Right, here's a checklist you can copy straight into your notes.",
];

/// How evidence is joined to a filler request in the same message.
const JOINS: &[&str] = &[
    " Also: ",
    " ps. ",
    " Side note - ",
    " Different topic: ",
    " ",
];

/// What an abstention answer says.
const NOT_IN_HISTORY: &str = "Nothing in the chat history says so.";

/// The generator's state: a seeded stream and the configuration.
struct Gen {
    rng: ChaCha8Rng,
    config: ChatProbeConfig,
}

/// One planted user turn: its text, the session it goes in (an index into
/// the haystack, sessions in date order), and whether it is gold.
struct Plant {
    text: String,
    session: usize,
    gold: bool,
}

impl Gen {
    fn pick(&mut self, items: &'static [&'static str]) -> &'static str {
        items.choose(&mut self.rng).copied().unwrap_or("")
    }

    fn filler(&mut self) -> String {
        let mut text = self.pick(FILLER).to_string();
        for (slot, values) in FILLER_SLOTS {
            while text.contains(slot) {
                let v = self.pick(values);
                text = text.replacen(slot, v, 1);
            }
        }
        text
    }

    /// The evidence inside a whole chat message: alone, after a request,
    /// or before one.
    fn embed(&mut self, statement: &str) -> String {
        match self.rng.random_range(0..20) {
            0..9 => statement.to_string(),
            9..14 => {
                let before = self.filler();
                let join = self.pick(JOINS);
                format!("{before}{join}{statement}")
            }
            _ => {
                let after = self.filler();
                let sep = if statement.ends_with(['.', '!', '?']) {
                    " "
                } else {
                    ". "
                };
                format!("{statement}{sep}{after}")
            }
        }
    }

    /// Any one session index.
    fn any_session(&mut self) -> usize {
        self.rng.random_range(0..self.config.sessions.max(1))
    }

    /// `count` distinct session indices in increasing order.
    fn distinct_sessions(&mut self, count: usize) -> Vec<usize> {
        let total = self.config.sessions.max(count);
        let mut picked: Vec<usize> = (0..total).collect();
        picked.shuffle(&mut self.rng);
        picked.truncate(count);
        picked.sort_unstable();
        picked
    }

    /// Two sessions, the first in the first half of the haystack and the
    /// second in the second half, so that the second is well after.
    fn early_and_late(&mut self) -> (usize, usize) {
        let total = self.config.sessions.max(2);
        let half = total / 2;
        (
            self.rng.random_range(0..half),
            self.rng.random_range(half..total),
        )
    }

    /// Builds the haystack around the planted turns and returns the
    /// instance (question fields left for the caller) and the session
    /// dates.
    fn haystack(&mut self, id: &str, plants: &[Plant]) -> (Instance, Vec<DateTime<Utc>>) {
        // Never fewer sessions than the plants need (a tiny `sessions`).
        let needed = plants.iter().map(|p| p.session + 1).max().unwrap_or(1);
        let total = self.config.sessions.max(needed);
        let start = Utc
            .with_ymd_and_hms(2022, 3, 14, 8, 15, 0)
            .single()
            .unwrap_or_default()
            + Duration::days(self.rng.random_range(0..300));
        let mut dates = Vec::with_capacity(total);
        let mut at = start;
        for _ in 0..total {
            at += Duration::days(self.rng.random_range(9..23))
                + Duration::minutes(self.rng.random_range(0..720));
            dates.push(at);
        }
        let mut sessions = Vec::with_capacity(total);
        let mut ids = Vec::with_capacity(total);
        let mut answer_ids = Vec::new();
        for s in 0..total {
            let (lo, hi) = self.config.turns;
            let n = self.rng.random_range(lo.max(1)..hi.max(lo + 1));
            let mut users: Vec<(String, bool)> = (0..n).map(|_| (self.filler(), false)).collect();
            let mut gold_here = false;
            for plant in plants.iter().filter(|p| p.session == s) {
                let at = self.rng.random_range(0..=users.len());
                users.insert(at, (plant.text.clone(), plant.gold));
                gold_here |= plant.gold;
            }
            let mut turns = Vec::with_capacity(users.len() * 2);
            for (content, gold) in users {
                turns.push(Turn {
                    role: "user".into(),
                    content,
                    has_answer: gold.then_some(true),
                });
                turns.push(Turn {
                    role: "assistant".into(),
                    content: self.pick(REPLIES).to_string(),
                    has_answer: None,
                });
            }
            let session_id = format!("{id}_s{s:02}");
            if gold_here {
                answer_ids.push(session_id.clone());
            }
            ids.push(session_id);
            sessions.push(turns);
        }
        let asked_at = at
            + Duration::days(self.rng.random_range(1..10))
            + Duration::minutes(self.rng.random_range(0..600));
        let instance = Instance {
            question_id: id.to_string(),
            question_type: String::new(),
            question: String::new(),
            answer: serde_json::Value::Null,
            question_date: format_date(asked_at),
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

    fn gold(&mut self, statement: &str, session: usize) -> Plant {
        Plant {
            text: self.embed(statement),
            session,
            gold: true,
        }
    }

    fn single_session_user(&mut self, id: &str, which: usize) -> Instance {
        let f = &FACTS[which % FACTS.len()];
        let value = self.pick(f.values);
        let statement = self.pick(f.said).replace(VALUE, value);
        let session = self.any_session();
        let plant = self.gold(&statement, session);
        let question = self.pick(f.asked);
        let (inst, _) = self.haystack(id, &[plant]);
        Self::finish(inst, "single-session-user", question, value)
    }

    fn preference(&mut self, id: &str, which: usize) -> Instance {
        let p = &PREFERENCES[which % PREFERENCES.len()];
        let statement = self.pick(p.said);
        let session = self.any_session();
        let plant = self.gold(statement, session);
        let question = self.pick(p.asked);
        let (inst, _) = self.haystack(id, &[plant]);
        Self::finish(inst, "single-session-preference", question, p.answer)
    }

    fn multi_session(&mut self, id: &str, which: usize) -> Instance {
        let t = &TALLIES[which % TALLIES.len()];
        let count = self.rng.random_range(2..=3).min(t.items.len());
        let mut items = t.items.to_vec();
        items.shuffle(&mut self.rng);
        items.truncate(count);
        let sessions = self.distinct_sessions(count);
        let mut plants = Vec::with_capacity(count);
        for (session, (item, amount)) in sessions.into_iter().zip(&items) {
            let statement = self
                .pick(t.said)
                .replace(VALUE, item)
                .replace(AMOUNT, &amount.to_string());
            plants.push(self.gold(&statement, session));
        }
        let sum: u32 = items.iter().map(|(_, amount)| amount).sum();
        let answer = match t.total {
            Total::Count => items.len().to_string(),
            Total::Dollars => format!("${sum}"),
            Total::Kilometres => format!("{sum} km"),
        };
        let question = self.pick(t.asked);
        let (inst, _) = self.haystack(id, &plants);
        Self::finish(inst, "multi-session", question, &answer)
    }

    fn knowledge_update(&mut self, id: &str, which: usize) -> Instance {
        let u = &UPDATES[which % UPDATES.len()];
        let mut indices: Vec<usize> = (0..u.values.len()).collect();
        indices.shuffle(&mut self.rng);
        let (mut a, mut b) = match indices.as_slice() {
            [a, b, ..] => (*a, *b),
            _ => (0, 0),
        };
        if u.ordered && a > b {
            std::mem::swap(&mut a, &mut b);
        }
        let old = u.values.get(a).copied().unwrap_or("");
        let new = u.values.get(b).copied().unwrap_or("");
        let (early, late) = self.early_and_late();
        let before = self.pick(u.before).replace(VALUE, old);
        let after = self.pick(u.after).replace(VALUE, new);
        let plants = [self.gold(&before, early), self.gold(&after, late)];
        let question = self.pick(u.asked);
        let (inst, _) = self.haystack(id, &plants);
        Self::finish(inst, "knowledge-update", question, new)
    }

    fn temporal(&mut self, id: &str, which: usize) -> Instance {
        let i = which % EVENTS.len();
        let j = (i + 1 + which / EVENTS.len() % (EVENTS.len() - 1)) % EVENTS.len();
        let (first, second) = (&EVENTS[i], &EVENTS[j]);
        if which.is_multiple_of(3) {
            let session = self.any_session();
            let said = self.pick(first.said);
            let plant = self.gold(said, session);
            let (inst, dates) = self.haystack(id, &[plant]);
            let asked = parse_date(&inst.question_date).unwrap_or_default();
            let on = dates.get(session).copied().unwrap_or_default();
            let days = (asked.date_naive() - on.date_naive()).num_days();
            let question = self.pick(SINCE).replace("<a>", first.clause);
            return Self::finish(inst, "temporal-reasoning", &question, &days.to_string());
        }
        let sessions = self.distinct_sessions(2);
        let (s0, s1) = match sessions.as_slice() {
            [a, b, ..] => (*a, *b),
            _ => (0, 0),
        };
        let said0 = self.pick(first.said);
        let said1 = self.pick(second.said);
        let plants = [self.gold(said0, s0), self.gold(said1, s1)];
        let (inst, dates) = self.haystack(id, &plants);
        let (a, b) = if self.rng.random_bool(0.5) {
            (first, second)
        } else {
            (second, first)
        };
        if which % 3 == 1 {
            let question = self
                .pick(EARLIER)
                .replace("<a>", a.clause)
                .replace("<b>", b.clause);
            return Self::finish(inst, "temporal-reasoning", &question, first.clause);
        }
        let d0 = dates.get(s0).copied().unwrap_or_default();
        let d1 = dates.get(s1).copied().unwrap_or_default();
        let days = (d1.date_naive() - d0.date_naive()).num_days();
        let question = self
            .pick(BETWEEN)
            .replace("<a>", a.clause)
            .replace("<b>", b.clause);
        Self::finish(inst, "temporal-reasoning", &question, &days.to_string())
    }

    /// A question near a topic the haystack talks about but does not
    /// answer. Besides the near-topic turn, the haystack holds one more
    /// personal fact, so neither "anything personal here" nor "anything
    /// on this topic here" gives the answer away.
    fn abstention(&mut self, which: usize, id_of: impl Fn(&str) -> String) -> Instance {
        let near = &NEAR_MISSES[which % NEAR_MISSES.len()];
        let id = id_of(tag(near.kind));
        let decoy = self.pick(near.said);
        let decoy_session = self.any_session();
        let f = &FACTS[(which * 5 + 3) % FACTS.len()];
        let value = self.pick(f.values);
        let other = self.pick(f.said).replace(VALUE, value);
        let other_session = self.any_session();
        let plants = [
            Plant {
                text: self.embed(decoy),
                session: decoy_session,
                gold: false,
            },
            Plant {
                text: self.embed(&other),
                session: other_session,
                gold: false,
            },
        ];
        let question = self.pick(near.asked);
        let (inst, _) = self.haystack(&id, &plants);
        Self::finish(inst, near.kind, question, NOT_IN_HISTORY)
    }
}

/// The id tag of a question type.
fn tag(kind: &str) -> &'static str {
    match kind {
        "single-session-preference" => "pref",
        "multi-session" => "multi",
        "knowledge-update" => "ku",
        "temporal-reasoning" => "temporal",
        _ => "ssu",
    }
}

/// Builds one instance of a type: (generator, question id, variant).
type MakeInstance = fn(&mut Gen, &str, usize) -> Instance;

/// Generates `6 × per_type` chat probes: `per_type` of each answerable type
/// (single-session-user, single-session-preference, multi-session,
/// knowledge-update, temporal-reasoning, in that order, ids
/// `chat_<tag>_<i>`), then `per_type` near-topic abstention instances (ids
/// `chat_<tag>_<i>_abs`, `question_type` the type they pose as).
///
/// ```
/// use recall_datasets::chat_probes::{ChatProbeConfig, generate};
/// let config = ChatProbeConfig { per_type: 2, ..ChatProbeConfig::default() };
/// let probes = generate(&config);
/// assert_eq!(probes.len(), 12);
/// assert_eq!(probes, generate(&config));
/// assert_eq!(probes.iter().filter(|p| p.is_abstention()).count(), 2);
/// ```
pub fn generate(config: &ChatProbeConfig) -> Vec<Instance> {
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
            let id = format!("chat_{tag}_{i:03}");
            out.push(make(&mut g, &id, i));
        }
    }
    for i in 0..config.per_type {
        out.push(g.abstention(i, |tag| format!("chat_{tag}_{i:03}_abs")));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn small() -> ChatProbeConfig {
        ChatProbeConfig {
            per_type: 12,
            ..ChatProbeConfig::default()
        }
    }

    fn evidence(p: &Instance) -> Vec<(usize, &Turn)> {
        p.haystack_sessions
            .iter()
            .enumerate()
            .flat_map(|(s, turns)| turns.iter().map(move |t| (s, t)))
            .filter(|(_, t)| t.is_evidence())
            .collect()
    }

    /// Every text the generator emits: turns, questions, answers.
    fn all_text(probes: &[Instance]) -> Vec<String> {
        let mut out = Vec::new();
        for p in probes {
            out.push(p.question.clone());
            out.push(p.answer.as_str().unwrap_or_default().to_string());
            out.extend(
                p.haystack_sessions
                    .iter()
                    .flatten()
                    .map(|t| t.content.clone()),
            );
        }
        out
    }

    /// The string literals of `probes.rs` (comments skipped).
    fn probe_literals() -> Vec<String> {
        let source = include_str!("probes.rs");
        let mut out = Vec::new();
        for line in source.lines() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut current: Option<String> = None;
            let mut escaped = false;
            for c in line.chars() {
                match current.as_mut() {
                    None if c == '"' => current = Some(String::new()),
                    None => {}
                    Some(s) if escaped => {
                        s.push(c);
                        escaped = false;
                    }
                    Some(_) if c == '\\' => escaped = true,
                    Some(_) if c == '"' => out.extend(current.take()),
                    Some(s) => s.push(c),
                }
            }
        }
        out
    }

    /// The literal's pieces between `{slot}` markers.
    fn fragments(literal: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut current = String::new();
        let mut in_slot = false;
        for c in literal.chars() {
            match c {
                '{' => {
                    in_slot = true;
                    out.push(std::mem::take(&mut current));
                }
                '}' => in_slot = false,
                _ if !in_slot => current.push(c),
                _ => {}
            }
        }
        out.push(current);
        out.into_iter()
            .map(|f| f.trim().to_lowercase())
            .filter(|f| !f.is_empty())
            .collect()
    }

    fn words(text: &str) -> HashSet<&str> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect()
    }

    #[test]
    fn same_seed_same_probes_and_another_seed_differs() {
        let a = generate(&small());
        assert_eq!(a, generate(&small()));
        let b = generate(&ChatProbeConfig {
            seed: 12,
            ..small()
        });
        assert_ne!(a, b);
    }

    #[test]
    fn counts_ids_and_types() {
        let config = small();
        let probes = generate(&config);
        assert_eq!(probes.len(), 6 * config.per_type);
        let ids: HashSet<&str> = probes.iter().map(|p| p.question_id.as_str()).collect();
        assert_eq!(ids.len(), probes.len(), "question ids are unique");
        for kind in [
            "single-session-user",
            "single-session-preference",
            "multi-session",
            "knowledge-update",
            "temporal-reasoning",
        ] {
            let answerable = probes
                .iter()
                .filter(|p| p.question_type == kind && !p.is_abstention())
                .count();
            assert_eq!(answerable, config.per_type, "{kind}");
        }
        assert_eq!(
            probes.iter().filter(|p| p.is_abstention()).count(),
            config.per_type
        );
        for p in &probes {
            assert!(
                crate::longmemeval::QUESTION_TYPES.contains(&p.question_type.as_str()),
                "{}",
                p.question_type
            );
            assert_eq!(p.haystack_sessions.len(), config.sessions);
            assert_eq!(p.haystack_session_ids.len(), config.sessions);
            assert_eq!(p.haystack_dates.len(), config.sessions);
        }
    }

    #[test]
    fn answerable_probes_plant_gold_in_their_answer_sessions_and_abstentions_none() {
        let probes = generate(&small());
        for p in &probes {
            let gold = evidence(p);
            assert!(
                p.haystack_sessions
                    .iter()
                    .flatten()
                    .all(|t| t.role == "user" || t.has_answer.is_none())
            );
            if p.is_abstention() {
                assert!(gold.is_empty(), "{}", p.question_id);
                assert!(p.answer_session_ids.is_empty(), "{}", p.question_id);
                assert!(
                    p.haystack_sessions
                        .iter()
                        .flatten()
                        .all(|t| t.has_answer.is_none())
                );
                continue;
            }
            assert!(!gold.is_empty(), "{}", p.question_id);
            let expected = match p.question_type.as_str() {
                "knowledge-update" => 2..=2,
                "multi-session" => 2..=3,
                "temporal-reasoning" => 1..=2,
                _ => 1..=1,
            };
            assert!(expected.contains(&gold.len()), "{}", p.question_id);
            let gold_sessions: HashSet<&str> = gold
                .iter()
                .map(|(s, _)| p.haystack_session_ids[*s].as_str())
                .collect();
            let listed: HashSet<&str> = p.answer_session_ids.iter().map(String::as_str).collect();
            assert_eq!(gold_sessions, listed, "{}", p.question_id);
            assert_eq!(
                listed.len(),
                gold.len(),
                "{}: one gold turn per session",
                p.question_id
            );
        }
    }

    #[test]
    fn a_tiny_haystack_still_holds_every_gold_turn() {
        let probes = generate(&ChatProbeConfig {
            per_type: 6,
            sessions: 1,
            turns: (1, 2),
            ..ChatProbeConfig::default()
        });
        for p in probes.iter().filter(|p| !p.is_abstention()) {
            let expected = match p.question_type.as_str() {
                "knowledge-update" => 2,
                "multi-session" => 2,
                _ => 1,
            };
            assert!(evidence(p).len() >= expected, "{}", p.question_id);
            assert_eq!(p.haystack_sessions.len(), p.haystack_dates.len());
        }
    }

    #[test]
    fn dates_increase_and_the_question_comes_last() {
        for p in generate(&small()) {
            let dates: Vec<_> = p
                .haystack_dates
                .iter()
                .map(|d| parse_date(d).unwrap())
                .collect();
            assert!(dates.windows(2).all(|w| w[0] < w[1]));
            assert!(parse_date(&p.question_date).unwrap() > *dates.last().unwrap());
        }
    }

    #[test]
    fn knowledge_updates_put_the_new_value_in_a_later_dated_session() {
        let probes = generate(&ChatProbeConfig::default());
        let mut seen = 0;
        for p in probes
            .iter()
            .filter(|p| p.question_type == "knowledge-update" && !p.is_abstention())
        {
            seen += 1;
            let answer = p.answer.as_str().unwrap();
            let gold = evidence(p);
            assert_eq!(gold.len(), 2, "{}", p.question_id);
            let (old_s, old) = gold[0];
            let (new_s, new) = gold[1];
            let old_at = parse_date(&p.haystack_dates[old_s]).unwrap();
            let new_at = parse_date(&p.haystack_dates[new_s]).unwrap();
            assert!(new_at > old_at, "{}", p.question_id);
            assert!(
                new.content.contains(answer),
                "{}: {}",
                p.question_id,
                new.content
            );
            assert!(
                !old.content.contains(answer),
                "{}: {}",
                p.question_id,
                old.content
            );
        }
        assert_eq!(seen, ChatProbeConfig::default().per_type);
    }

    #[test]
    fn temporal_answers_match_the_session_dates() {
        for p in generate(&small())
            .iter()
            .filter(|p| p.question_type == "temporal-reasoning" && !p.is_abstention())
        {
            let gold = evidence(p);
            let day = |s: usize| parse_date(&p.haystack_dates[s]).unwrap().date_naive();
            let answer = p.answer.as_str().unwrap();
            if let Ok(days) = answer.parse::<i64>() {
                let expected = match gold.as_slice() {
                    [(s, _)] => {
                        (parse_date(&p.question_date).unwrap().date_naive() - day(*s)).num_days()
                    }
                    [(a, _), (b, _)] => (day(*b) - day(*a)).num_days(),
                    _ => panic!("{}", p.question_id),
                };
                assert_eq!(days, expected, "{}", p.question_id);
                assert!(days > 0);
            } else {
                assert_eq!(gold.len(), 2, "{}", p.question_id);
                assert!(p.question.contains(answer), "{}", p.question_id);
            }
        }
    }

    #[test]
    fn multi_session_answers_count_or_sum_the_gold_turns() {
        for p in generate(&small())
            .iter()
            .filter(|p| p.question_type == "multi-session" && !p.is_abstention())
        {
            let answer = p.answer.as_str().unwrap();
            let gold = evidence(p);
            if let Ok(n) = answer.parse::<usize>() {
                assert_eq!(n, gold.len(), "{}", p.question_id);
            } else {
                let total: u32 = answer
                    .trim_start_matches('$')
                    .trim_end_matches(" km")
                    .parse()
                    .unwrap();
                assert!(total > 0, "{}", p.question_id);
            }
        }
    }

    #[test]
    fn abstentions_plant_a_near_topic_turn_that_is_not_gold() {
        let config = ChatProbeConfig {
            per_type: NEAR_MISSES.len(),
            ..ChatProbeConfig::default()
        };
        let probes = generate(&config);
        let abs: Vec<&Instance> = probes.iter().filter(|p| p.is_abstention()).collect();
        assert_eq!(abs.len(), NEAR_MISSES.len());
        for (p, near) in abs.iter().zip(NEAR_MISSES) {
            assert_eq!(p.question_type, near.kind);
            assert!(near.asked.contains(&p.question.as_str()));
            let planted = p
                .haystack_sessions
                .iter()
                .flatten()
                .any(|t| near.said.iter().any(|s| t.content.contains(s)));
            assert!(planted, "{}", p.question_id);
        }
    }

    #[test]
    fn files_round_trip_through_the_longmemeval_loader() {
        let probes = generate(&ChatProbeConfig {
            per_type: 3,
            ..ChatProbeConfig::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.json");
        crate::longmemeval::save(&path, &probes).unwrap();
        assert_eq!(crate::longmemeval::load(&path).unwrap(), probes);
    }

    #[test]
    fn nothing_of_probes_rs_is_reused() {
        let literals = probe_literals();
        assert!(literals.len() > 200, "read {} literals", literals.len());
        // Distinctive pieces of probes.rs, as a guard on the reader above.
        for known in [
            "rescue puppy",
            "Before I forget, ",
            "How many days ago did I {}?",
            "The conversation never mentions this.",
            "Sure! Here are a few ideas you could try, starting with the simplest one.",
        ] {
            assert!(
                literals.iter().any(|l| l.contains(known)),
                "{known} not read"
            );
        }
        let probes = generate(&ChatProbeConfig::default());
        let text: Vec<String> = all_text(&probes).iter().map(|t| t.to_lowercase()).collect();
        // No piece of three words or more of any probes.rs template.
        for fragment in literals.iter().flat_map(|l| fragments(l)) {
            if fragment.split_whitespace().count() < 3 {
                continue;
            }
            assert!(
                !text.iter().any(|t| t.contains(&fragment)),
                "probes.rs text reused: {fragment:?}"
            );
        }
        // No name or proper-noun value of probes.rs, as a whole word.
        let capitalised: Vec<&str> = literals
            .iter()
            .map(String::as_str)
            .filter(|l| {
                l.len() >= 3
                    && l.chars().all(char::is_alphanumeric)
                    && l.starts_with(|c: char| c.is_uppercase())
            })
            .collect();
        assert!(capitalised.contains(&"Priya"));
        let original = all_text(&probes);
        for text in &original {
            let w = words(text);
            for name in &capitalised {
                assert!(!w.contains(name), "probes.rs name {name:?} in {text:?}");
            }
        }
        // No value of any table here is a probes.rs literal.
        let lower: HashSet<String> = literals.iter().map(|l| l.trim().to_lowercase()).collect();
        let mut values: Vec<&str> = Vec::new();
        values.extend(FACTS.iter().flat_map(|f| f.values.iter().copied()));
        values.extend(UPDATES.iter().flat_map(|u| u.values.iter().copied()));
        values.extend(TALLIES.iter().flat_map(|t| t.items.iter().map(|(i, _)| *i)));
        values.extend(PREFERENCES.iter().map(|p| p.answer));
        values.extend(EVENTS.iter().map(|e| e.clause));
        values.extend(FRIENDS);
        values.extend(TOWNS);
        values.extend(REPLIES);
        for v in values {
            assert!(!lower.contains(&v.to_lowercase()), "probes.rs value {v:?}");
        }
    }

    #[test]
    fn filler_names_are_not_fact_values() {
        let values: HashSet<&str> = FACTS
            .iter()
            .flat_map(|f| f.values.iter().copied())
            .chain(UPDATES.iter().flat_map(|u| u.values.iter().copied()))
            .collect();
        for name in FRIENDS.iter().chain(TOWNS) {
            assert!(!values.contains(name), "{name}");
        }
        assert!(FILLER.len() >= 40);
    }
}

//! The tantivy BM25 index over title + content, derived from the tables.
//!
//! Documents carry the memory's store sequence number as a fast field (the
//! engine maps it back to the memory), the tenant, and a `tenant|bank` scope
//! term so the scope filter is part of the query itself. The analyzer is
//! English: lowercase, stop words removed, stemmed. Each commit records the
//! highest sequence number indexed, so at open the index is caught up from the
//! tables, or rebuilt when it cannot be opened.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

use crate::erase::EraseSelector;
use crate::error::{IndexerError, Result};
use crate::rows::MemoryRow;

const ANALYZER: &str = "recall_en";
const WRITER_HEAP: usize = 64 << 20;

#[derive(Clone, Copy)]
struct Fields {
    seq: Field,
    /// The memory id, so an erasure can delete the document by term.
    id: Field,
    tenant: Field,
    scope: Field,
    text: Field,
}

/// The `scope` term of a tenant and bank. `|` is outside the alphabet of
/// tenant and bank names, so the pair is unambiguous.
fn scope_term(tenant: &str, bank: &str) -> String {
    format!("{tenant}|{bank}")
}

/// One lexical hit: the memory's sequence number and its raw BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalHit {
    /// The memory's store sequence number.
    pub seq: u64,
    /// tantivy's BM25 score (k1 1.2, b 0.75), not normalized.
    pub score: f32,
}

struct WriterState {
    writer: IndexWriter<TantivyDocument>,
    /// Highest sequence number added (committed or not).
    added_seq: u64,
    /// Documents added since the last commit.
    dirty: bool,
}

/// The BM25 index. Thread safe: searches run concurrently; additions are
/// serialized. Added documents become searchable at the next search (which
/// commits first when anything is pending), so writes stay cheap and reads
/// see every acknowledged write.
pub(crate) struct LexicalIndex {
    path: PathBuf,
    reader: IndexReader,
    fields: Fields,
    analyzer: TextAnalyzer,
    writer: Mutex<WriterState>,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text_options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        seq: builder.add_u64_field("seq", FAST),
        id: builder.add_text_field("id", STRING),
        tenant: builder.add_text_field("tenant", STRING),
        scope: builder.add_text_field("scope", STRING),
        text: builder.add_text_field("text", text_options),
    };
    (builder.build(), fields)
}

/// English stop words: the common NLTK list. tantivy's built-in English list
/// (Lucene's 33 words) keeps question words like "what", "does", "how", which
/// agents' recall queries are full of and which match unrelated memories
/// ("does" stems like "does not exist").
const STOP_WORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
    "d",
    "ll",
    "m",
    "o",
    "re",
    "ve",
    "y",
];

fn analyzer() -> TextAnalyzer {
    let stop_words = StopWordFilter::remove(STOP_WORDS.iter().map(|w| w.to_string()));
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(stop_words)
        .filter(Stemmer::new(Language::English))
        .build()
}

impl LexicalIndex {
    /// Opens the index in `dir`, or creates it. An index that cannot be opened
    /// (damaged files, another schema) is moved aside and rebuilt empty: it is
    /// derived data, and the caller catches it up from the tables.
    pub(crate) fn open(dir: &Path) -> Result<LexicalIndex> {
        match Self::open_existing_or_new(dir) {
            Ok(index) => Ok(index),
            Err(e) => {
                tracing::warn!(path = %dir.display(), error = %e, "lexical index unusable; rebuilding it from the tables");
                std::fs::remove_dir_all(dir).map_err(IndexerError::io(dir))?;
                Self::open_existing_or_new(dir)
            }
        }
    }

    fn open_existing_or_new(dir: &Path) -> Result<LexicalIndex> {
        std::fs::create_dir_all(dir).map_err(IndexerError::io(dir))?;
        let (schema, fields) = schema();
        let has_meta = dir.join("meta.json").exists();
        let index = if has_meta {
            let index = Index::open_in_dir(dir)?;
            if index.schema() != schema {
                return Err(IndexerError::corrupt(
                    "lexical index",
                    "schema differs from this version's",
                ));
            }
            index
        } else {
            Index::create_in_dir(dir, schema)?
        };
        let analyzer = analyzer();
        index.tokenizers().register(ANALYZER, analyzer.clone());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let writer = index.writer(WRITER_HEAP)?;
        let committed = committed_seq(&index)?;
        // Touch every segment once so damage shows now, not mid-recall.
        let searcher = reader.searcher();
        for segment in searcher.segment_readers() {
            segment.fast_fields().u64("seq")?;
        }
        Ok(LexicalIndex {
            path: dir.to_path_buf(),
            reader,
            fields,
            analyzer,
            writer: Mutex::new(WriterState {
                writer,
                added_seq: committed,
                dirty: false,
            }),
        })
    }

    /// Highest sequence number whose document is in the index (committed or not).
    pub(crate) fn indexed_seq(&self) -> Result<u64> {
        Ok(self.lock()?.added_seq)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, WriterState>> {
        self.writer
            .lock()
            .map_err(|_| IndexerError::corrupt("lexical index", "writer lock poisoned"))
    }

    /// Adds documents for memory rows whose sequence number is above what the
    /// index holds; rows at or below it are skipped, so replays are idempotent.
    pub(crate) fn add(&self, rows: &[&MemoryRow]) -> Result<()> {
        let mut state = self.lock()?;
        for row in rows {
            if row.seq <= state.added_seq {
                continue;
            }
            let text = match &row.title {
                Some(title) => format!("{title}\n{}", row.content),
                None => row.content.clone(),
            };
            state.writer.add_document(doc!(
                self.fields.seq => row.seq,
                self.fields.id => row.id.as_str(),
                self.fields.tenant => row.tenant.as_str(),
                self.fields.scope => scope_term(&row.tenant, &row.bank),
                self.fields.text => text,
            ))?;
            state.added_seq = row.seq;
            state.dirty = true;
        }
        Ok(())
    }

    /// Makes everything added searchable and durable, recording the highest
    /// sequence number in the commit.
    pub(crate) fn commit(&self) -> Result<()> {
        let mut state = self.lock()?;
        self.commit_locked(&mut state)
    }

    fn commit_locked(&self, state: &mut WriterState) -> Result<()> {
        if !state.dirty {
            return Ok(());
        }
        let mut prepared = state.writer.prepare_commit()?;
        prepared.set_payload(&state.added_seq.to_string());
        prepared.commit()?;
        self.reader.reload()?;
        state.dirty = false;
        Ok(())
    }

    /// BM25 top `limit` within one tenant and the given banks.
    ///
    /// The scope is part of the query (zero-scored filter clauses), so no
    /// other tenant's or bank's document can be a candidate.
    /// Deletes the documents `selector` covers, commits, merges every
    /// segment into one (a deleted document's terms stay in its segment until
    /// a merge rewrites it) and removes the files no longer used.
    pub(crate) fn erase(&self, selector: &EraseSelector) -> Result<()> {
        let mut state = self.lock()?;
        match selector {
            EraseSelector::Memories { ids, .. } => {
                for id in ids {
                    state
                        .writer
                        .delete_term(Term::from_field_text(self.fields.id, id));
                }
            }
            EraseSelector::Bank { tenant, bank } => {
                state.writer.delete_term(Term::from_field_text(
                    self.fields.scope,
                    &scope_term(tenant, bank),
                ));
            }
            EraseSelector::Tenant { tenant } => {
                state
                    .writer
                    .delete_term(Term::from_field_text(self.fields.tenant, tenant));
            }
        }
        state.dirty = true;
        self.commit_locked(&mut state)?;
        let segments = state.writer.index().searchable_segment_ids()?;
        if !segments.is_empty() {
            state.writer.merge(&segments).wait()?;
        }
        state.writer.garbage_collect_files().wait()?;
        self.reader.reload()?;
        Ok(())
    }

    pub(crate) fn search(
        &self,
        tenant: &str,
        banks: &[&str],
        text: &str,
        limit: usize,
    ) -> Result<Vec<LexicalHit>> {
        if banks.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        {
            let mut state = self.lock()?;
            self.commit_locked(&mut state)?;
        }
        let terms = self.terms(text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let words: Vec<(Occur, Box<dyn Query>)> = terms
            .into_iter()
            .map(|t| {
                let term = Term::from_field_text(self.fields.text, &t);
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect();
        // One term per readable (tenant, bank) pair: the tenant is part of
        // every term, so no other tenant's document can match.
        let scope_clauses: Vec<(Occur, Box<dyn Query>)> = banks
            .iter()
            .map(|b| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.scope, &scope_term(tenant, b)),
                    IndexRecordOption::Basic,
                ));
                (Occur::Should, q)
            })
            .collect();
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(BooleanQuery::new(words)) as Box<dyn Query>,
            ),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(BooleanQuery::new(scope_clauses)),
                    0.0,
                )),
            ),
        ]);
        let searcher = self.reader.searcher();
        let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let column = searcher
                .segment_reader(address.segment_ord)
                .fast_fields()
                .u64("seq")?;
            let seq = column.first(address.doc_id).ok_or_else(|| {
                IndexerError::corrupt(
                    format!("lexical index at {}", self.path.display()),
                    "document without a sequence number",
                )
            })?;
            hits.push(LexicalHit { seq, score });
        }
        Ok(hits)
    }

    /// Σ idf over `text`'s distinct terms, with tantivy's BM25 idf
    /// `ln(1 + (N − n + 0.5) / (n + 0.5))`; an unseen term counts as n = 1.
    pub(crate) fn attainable(&self, text: &str) -> Result<f32> {
        let searcher = self.reader.searcher();
        let total = searcher.num_docs() as f32;
        let mut sum = 0.0f32;
        for t in self.terms(text) {
            let term = Term::from_field_text(self.fields.text, &t);
            let n = (searcher.doc_freq(&term)? as f32).max(1.0);
            sum += (1.0 + (total - n + 0.5).max(0.0) / (n + 0.5)).ln();
        }
        Ok(sum)
    }

    /// The distinct analyzed terms of `text` (lowercased, stemmed, no stop words).
    fn terms(&self, text: &str) -> BTreeSet<String> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut terms = BTreeSet::new();
        while stream.advance() {
            terms.insert(stream.token().text.clone());
        }
        terms
    }

    /// Documents in the index (committed).
    #[cfg(test)]
    pub(crate) fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The index directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Drops every document and starts over (used when the index is ahead of
    /// the tables, which only a damaged or foreign index can be).
    pub(crate) fn clear(&self) -> Result<()> {
        let mut state = self.lock()?;
        state.writer.delete_all_documents()?;
        state.added_seq = 0;
        state.dirty = true;
        self.commit_locked(&mut state)
    }
}

fn committed_seq(index: &Index) -> Result<u64> {
    let metas = index.load_metas()?;
    match metas.payload {
        None => Ok(0),
        Some(p) => p.parse::<u64>().map_err(|_| {
            IndexerError::corrupt("lexical index", format!("bad commit payload {p:?}"))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn row(seq: u64, tenant: &str, bank: &str, content: &str) -> MemoryRow {
        MemoryRow {
            seq,
            id: format!("id{seq}"),
            tenant: tenant.into(),
            bank: bank.into(),
            kind: "note".into(),
            title: None,
            content: content.into(),
            elements: vec![],
            source: "explicit".into(),
            trust: "agent".into(),
            agent: None,
            session_id: None,
            confidence: 1.0,
            observed_at_ms: 0,
            created_at_ms: 0,
            expires_at_ms: None,
            supersedes: None,
            vector: None,
        }
    }

    #[test]
    fn scope_is_part_of_the_query_and_stemming_matches() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let a = row(1, "acme", "org", "The deploys failed because of caching");
        let b = row(2, "other", "org", "deploy failed again caching");
        let c = row(3, "acme", "user:bob", "deploy failing with caches");
        index.add(&[&a, &b, &c]).unwrap();
        let hits = index.search("acme", &["org"], "deploy cache", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), vec![1]);
        let hits = index
            .search("acme", &["org", "user:bob"], "deploying", 10)
            .unwrap();
        assert_eq!(hits.len(), 2);
        assert!(
            index
                .search("acme", &["org"], "the of", 10)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn commit_records_the_sequence_and_reopen_skips_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        {
            let index = LexicalIndex::open(dir.path()).unwrap();
            index.add(&[&row(7, "t", "b", "alpha beta")]).unwrap();
            index.commit().unwrap();
        }
        let index = LexicalIndex::open(dir.path()).unwrap();
        assert_eq!(index.indexed_seq().unwrap(), 7);
        index.add(&[&row(7, "t", "b", "alpha beta")]).unwrap();
        index.commit().unwrap();
        assert_eq!(index.num_docs(), 1);
        drop(index);
        assert_eq!(
            committed_seq(&Index::open_in_dir(dir.path()).unwrap()).unwrap(),
            7
        );
    }

    #[test]
    fn a_damaged_index_is_rebuilt_empty() {
        let dir = tempfile::tempdir().unwrap();
        {
            let index = LexicalIndex::open(dir.path()).unwrap();
            index.add(&[&row(1, "t", "b", "alpha")]).unwrap();
            index.commit().unwrap();
        }
        std::fs::write(dir.path().join("meta.json"), b"{not json").unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        assert_eq!(index.indexed_seq().unwrap(), 0);
        assert_eq!(index.num_docs(), 0);
    }
}

#[cfg(test)]
mod identifier_tests {
    use super::*;

    #[test]
    fn identifiers_are_single_terms_and_question_words_are_dropped() {
        let mut a = analyzer();
        let mut stream = a.token_stream("What does deploy error E4012 mean? ledger_sync_worker.rs");
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        assert_eq!(
            out,
            vec![
                "deploy", "error", "e4012", "mean", "ledger", "sync", "worker", "rs"
            ]
        );
    }

    #[test]
    fn an_exact_identifier_outscores_look_alikes() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let mut rows = vec![];
        for (i, code) in ["E4012", "E4021", "E4027", "E4020"].iter().enumerate() {
            let mut r = super::tests::row(i as u64 + 1, "t", "b", "");
            r.content = format!("Deploy error {code} means something went wrong number {i}.");
            rows.push(r);
        }
        index.add(&rows.iter().collect::<Vec<_>>()).unwrap();
        let hits = index
            .search("t", &["b"], "What does deploy error E4012 mean?", 10)
            .unwrap();
        assert_eq!(hits[0].seq, 1, "{hits:?}");
    }
}

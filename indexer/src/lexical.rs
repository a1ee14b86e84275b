//! The tantivy BM25 index over title + content, derived from the tables.
//!
//! Documents carry the memory's store sequence number as a fast field (the
//! engine maps it back to the memory), the tenant, and a `tenant|bank` scope
//! term. The analyzer is English: lowercase, stop words removed, stemmed.
//! Each commit records the highest sequence number indexed, so at open the
//! index is caught up from the tables, or rebuilt when it cannot be opened.
//!
//! Every indexed term carries its document's tenant (`tenant␟term`). So a
//! query's terms name the tenant — another tenant's document cannot match,
//! by construction — and a query is a plain union of term queries, which
//! tantivy answers with block-max WAND (a filter clause beside the terms
//! would make it score every match). The banks a caller may read are
//! checked on each hit (a fast field holds a key of the document's bank);
//! when too few hits survive that check, the search widens, and at worst
//! runs with the scope as a filter clause. The BM25 statistics are the
//! tenant's own ([`TenantStatistics`]): a term's document frequency counts
//! only the tenant's documents, and so does the document count, so scores do
//! not depend on other tenants' data. Scores are rounded past the last bits
//! in which tantivy's sums differ from one segment layout to another, and
//! equal scores rank by sequence number, so tied hits keep their order
//! whatever the layout. Which documents of a tie group straddling the cut
//! are fetched still follows the layout (tantivy returns ties in segment
//! order, and segments are named at random): holding such groups whole
//! took a wider search whenever templated texts tie, and recall p50 at
//! 100k (`recall-bench scale`) went from 1.3 to 2.2 ms with one widening.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, ConstScoreQuery, EnableScoring, Occur, Query, TermQuery,
};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{PreTokenizedString, TextAnalyzer, Token};
use tantivy::{
    DocSet, Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, Searcher, TERMINATED,
    TantivyDocument, Term,
};

use rayon::prelude::*;

use crate::erasure::EraseSelector;
use crate::error::{IndexerError, Result};
use crate::rows::MemoryRow;

const ANALYZER: &str = "recall_en";
const WRITER_HEAP: usize = 64 << 20;
/// Batches at least this large are analyzed in parallel.
const PARALLEL_ANALYSIS_FROM: usize = 32;

#[derive(Clone, Copy)]
struct Fields {
    seq: Field,
    /// The memory id, so an erasure can delete the document by term.
    id: Field,
    tenant: Field,
    scope: Field,
    /// [`bank_key`] of the document's bank.
    bank: Field,
    text: Field,
}

/// The `scope` term of a tenant and bank. `|` is outside the alphabet of
/// tenant and bank names, so the pair is unambiguous.
fn scope_term(tenant: &str, bank: &str) -> String {
    format!("{tenant}|{bank}")
}

/// Separates the tenant from the analyzed word in an indexed term; outside
/// the alphabet of tenant names and of the analyzer's output.
const TENANT_END: char = '\u{1f}';

/// The indexed form of `word` in `tenant`'s documents.
fn tenant_word(tenant: &str, word: &str) -> String {
    // Built by hand: `format!` was a visible share of indexing a bulk import.
    let mut out = String::with_capacity(tenant.len() + TENANT_END.len_utf8() + word.len());
    out.push_str(tenant);
    out.push(TENANT_END);
    out.push_str(word);
    out
}

/// A stable 64-bit key of a bank name (FNV-1a), stored per document so a
/// hit's bank is checked without reading stored fields.
fn bank_key(bank: &str) -> u64 {
    bank.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How many times the requested hits a search fetches before it falls
/// back to filtering by scope inside the query.
const MAX_WIDENING: usize = 16;
/// How many more hits than the readable banks' share promises a search
/// fetches first: the share is of the tenant's documents, not of the
/// query's matches.
const WIDENING_MARGIN: f64 = 1.25;

/// `score` rounded to 12 significant bits (a relative step of 2⁻¹²).
/// tantivy sums a document's term scores in an order that follows the
/// segment layout, which background merges change: the same document can
/// score an ulp or two apart from run to run, and two documents that tie
/// (templated memories) swap places. Rounded, they agree unless the sum
/// sits within those ulps of a rounding boundary (about one in a thousand).
fn steady(score: f32) -> f32 {
    const DROPPED: u32 = 23 - 12;
    if !score.is_finite() {
        return score;
    }
    let half = 1u32 << (DROPPED - 1);
    f32::from_bits((score.to_bits() + half) & !((1u32 << DROPPED) - 1))
}

/// The first `limit` of `hits` by score, ties by sequence number (the
/// earlier memory first), so that equal scores rank the same in every run.
fn first_by_score_then_seq(mut hits: Vec<LexicalHit>, limit: usize) -> Vec<LexicalHit> {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.seq.cmp(&b.seq)));
    hits.truncate(limit);
    hits
}

/// One lexical hit: the memory's sequence number and its raw BM25 score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LexicalHit {
    /// The memory's store sequence number.
    pub seq: u64,
    /// tantivy's BM25 score (k1 1.2, b 0.75), not normalized, rounded to 12
    /// significant bits (see `steady`).
    pub score: f32,
}

struct WriterState {
    /// None only if [`LexicalIndex::wait_for_merges`] could not open a
    /// fresh writer; writes then fail until the store is reopened.
    writer: Option<IndexWriter<TantivyDocument>>,
    /// Highest sequence number added (committed or not).
    added_seq: u64,
    /// Documents added since the last commit.
    dirty: bool,
}

impl WriterState {
    fn writer(&mut self) -> Result<&mut IndexWriter<TantivyDocument>> {
        self.writer.as_mut().ok_or(IndexerError::Closed {
            what: "lexical index writer",
        })
    }
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
    /// Why a commit failed, once one has. The documents added since the
    /// last good commit are then gone from the writer, and the sequence
    /// number a later commit would record would claim them: so nothing is
    /// added or committed any more, searches serve the last good commit,
    /// and the store is read-only until a reopen catches the index up from
    /// the tables (see [`LexicalIndex::failed`]).
    failed: std::sync::OnceLock<String>,
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
        bank: builder.add_u64_field("bank_key", FAST),
        // Named for its tenant-qualified terms: an index of the older kind
        // has a field `text`, differs in schema, and is rebuilt from the tables.
        text: builder.add_text_field("tenant_text", text_options),
    };
    (builder.build(), fields)
}

mod analyzer;
use analyzer::analyzer;

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
            let index = Index::open(directory(dir)?)?;
            if index.schema() != schema {
                return Err(IndexerError::corrupt(
                    "lexical index",
                    "schema differs from this version's",
                ));
            }
            index
        } else {
            Index::create(directory(dir)?, schema, IndexSettings::default())?
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
                writer: Some(writer),
                added_seq: committed,
                dirty: false,
            }),
            failed: std::sync::OnceLock::new(),
        })
    }

    /// Why the index stopped taking documents (a commit failed), if it did.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Highest sequence number whose document is in the index (committed or not).
    pub(crate) fn indexed_seq(&self) -> Result<u64> {
        Ok(self.lock()?.added_seq)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, WriterState>> {
        self.writer.lock().map_err(|_| IndexerError::Poisoned {
            what: "lexical index writer",
        })
    }

    /// Adds documents for memory rows whose sequence number is above what the
    /// index holds; rows at or below it are skipped, so replays are idempotent.
    pub(crate) fn add(&self, rows: &[&MemoryRow]) -> Result<()> {
        let documents = self.documents(rows)?;
        self.add_documents(documents)
    }

    /// The documents of the rows not yet indexed, analyzed but not added
    /// (see [`LexicalIndex::add_documents`]). Analysis (tokenizing,
    /// stemming) is most of the cost of adding a document; a bulk write
    /// spreads it over the rayon pool.
    pub(crate) fn documents(&self, rows: &[&MemoryRow]) -> Result<Vec<(u64, TantivyDocument)>> {
        let from = self.lock()?.added_seq;
        let document = |row: &&MemoryRow| (row.seq > from).then(|| (row.seq, self.document(row)));
        Ok(if rows.len() >= PARALLEL_ANALYSIS_FROM {
            rows.par_iter().filter_map(document).collect()
        } else {
            rows.iter().filter_map(document).collect()
        })
    }

    /// Adds documents from [`LexicalIndex::documents`], in sequence order;
    /// those at or below what the index holds are skipped.
    pub(crate) fn add_documents(&self, documents: Vec<(u64, TantivyDocument)>) -> Result<()> {
        let mut state = self.lock()?;
        if self.failed.get().is_some() {
            // The reopen that the failure asks for indexes these from the tables.
            return Ok(());
        }
        for (seq, doc) in documents {
            if seq <= state.added_seq {
                continue;
            }
            state.writer()?.add_document(doc)?;
            state.added_seq = seq;
            state.dirty = true;
        }
        Ok(())
    }

    /// The index document of a memory row.
    fn document(&self, row: &MemoryRow) -> TantivyDocument {
        let text = match &row.title {
            Some(title) => format!("{title}\n{}", row.content),
            None => row.content.clone(),
        };
        let mut doc = TantivyDocument::default();
        doc.add_u64(self.fields.seq, row.seq);
        doc.add_text(self.fields.id, &row.id);
        doc.add_text(self.fields.tenant, &row.tenant);
        doc.add_text(self.fields.scope, scope_term(&row.tenant, &row.bank));
        doc.add_u64(self.fields.bank, bank_key(&row.bank));
        doc.add_pre_tokenized_text(self.fields.text, self.tenant_tokens(&row.tenant, &text));
        doc
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
        let seq = state.added_seq.to_string();
        let committed = state.writer().and_then(|writer| {
            let mut prepared = writer.prepare_commit()?;
            prepared.set_payload(&seq);
            prepared.commit()?;
            Ok(())
        });
        if let Err(e) = committed {
            // What the writer held is lost or in doubt: it is dropped, and
            // the index takes nothing more until a reopen (see `failed`).
            tracing::error!(error = %e, path = %self.path.display(), "the BM25 index could not commit");
            let _ = self.failed.set(format!(
                "the BM25 index could not commit ({e}); reopening the store rebuilds it from the tables"
            ));
            state.writer = None;
            state.dirty = false;
            return Err(e);
        }
        self.reader.reload()?;
        state.dirty = false;
        Ok(())
    }

    /// Commits, then waits for the segment merges that commits started in
    /// the background; a fresh writer takes over (tantivy waits for merges
    /// only by closing its writer). Searches never need this; it is for
    /// timings that must not share the cores with merges.
    pub(crate) fn wait_for_merges(&self) -> Result<()> {
        let mut state = self.lock()?;
        self.commit_locked(&mut state)?;
        if let Some(writer) = state.writer.take() {
            let index = writer.index().clone();
            let waited = writer.wait_merging_threads();
            // A failed merge leaves the committed segments as they were;
            // writes go on with a fresh writer either way.
            state.writer = Some(index.writer(WRITER_HEAP)?);
            waited?;
        }
        self.reader.reload()?;
        Ok(())
    }

    /// Deletes the documents `selector` covers, commits, merges every
    /// segment into one (a deleted document's terms stay in its segment until
    /// a merge rewrites it) and removes the files no longer used.
    pub(crate) fn erase(&self, selector: &EraseSelector) -> Result<()> {
        let mut state = self.lock()?;
        match selector {
            EraseSelector::Memories { ids, .. } => {
                for id in ids {
                    state
                        .writer()?
                        .delete_term(Term::from_field_text(self.fields.id, id));
                }
            }
            EraseSelector::Bank { tenant, bank } => {
                state.writer()?.delete_term(Term::from_field_text(
                    self.fields.scope,
                    &scope_term(tenant, bank),
                ));
            }
            EraseSelector::Tenant { tenant } => {
                state
                    .writer()?
                    .delete_term(Term::from_field_text(self.fields.tenant, tenant));
            }
        }
        state.dirty = true;
        self.commit_locked(&mut state)?;
        let writer = state.writer()?;
        let segments = writer.index().searchable_segment_ids()?;
        if !segments.is_empty() {
            writer.merge(&segments).wait()?;
        }
        writer.garbage_collect_files().wait()?;
        self.reader.reload()?;
        Ok(())
    }

    /// BM25 top `limit` within one tenant and the given banks, scored with
    /// the tenant's own statistics.
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
            if let Err(e) = self.commit_locked(&mut state) {
                // Reads go on with the last good commit; the failure makes
                // the store read-only and says so.
                tracing::warn!(error = %e, "searching the last good BM25 commit");
            }
        }
        let words: Vec<Box<dyn Query>> = self
            .terms(text)
            .iter()
            .map(|word| {
                let term = Term::from_field_text(self.fields.text, &tenant_word(tenant, word));
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as Box<dyn Query>
            })
            .collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let union = || BooleanQuery::union(words.iter().map(|q| q.box_clone()).collect());
        let readable: Vec<u64> = banks.iter().map(|b| bank_key(b)).collect();
        let searcher = self.reader.searcher();
        let statistics = TenantStatistics::new(&searcher, self.fields, tenant)?;
        // A search of the whole tenant finds readable hits at about the
        // share of its documents the readable banks hold, so it starts
        // wide enough for them, and a share too small for the widest goes
        // straight to the filtered query. In a tenant of ten million
        // memories each pass is a whole block-WAND traversal: a recall of
        // one bank in twenty had made four.
        let mut readable_docs = 0;
        for bank in banks {
            let scope = Term::from_field_text(self.fields.scope, &scope_term(tenant, bank));
            readable_docs += searcher.doc_freq(&scope)?;
        }
        let share = readable_docs as f64 / statistics.docs.max(1) as f64;
        let widest = limit.saturating_mul(MAX_WIDENING);
        let first = match readable_docs >= statistics.docs {
            true => limit as f64,
            false => limit as f64 * WIDENING_MARGIN / share,
        };
        let mut fetch = if first <= widest as f64 {
            (first.ceil() as usize).max(limit)
        } else {
            widest.saturating_add(1)
        };
        while fetch <= widest {
            let top = searcher.search_with_statistics_provider(
                &union(),
                &TopDocs::with_limit(fetch).order_by_score(),
                &statistics,
            )?;
            let exhausted = top.len() < fetch;
            let hits = self.readable_hits(&searcher, top, &readable)?;
            if hits.len() >= limit || exhausted {
                return Ok(first_by_score_then_seq(hits, limit));
            }
            if fetch == widest {
                break;
            }
            fetch = fetch.saturating_mul(4).min(widest);
        }
        // Most matches are in banks this caller may not read: filter by
        // scope inside the query (exact, without WAND's skipping).
        let scopes: Vec<(Occur, Box<dyn Query>)> = banks
            .iter()
            .map(|b| {
                let term = Term::from_field_text(self.fields.scope, &scope_term(tenant, b));
                let q: Box<dyn Query> = Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                (Occur::Should, q)
            })
            .collect();
        let filtered = BooleanQuery::new(vec![
            (Occur::Must, Box::new(union()) as Box<dyn Query>),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(BooleanQuery::new(scopes)),
                    0.0,
                )),
            ),
        ]);
        let top = searcher.search_with_statistics_provider(
            &filtered,
            &TopDocs::with_limit(limit).order_by_score(),
            &statistics,
        )?;
        let hits = self.readable_hits(&searcher, top, &readable)?;
        Ok(first_by_score_then_seq(hits, limit))
    }

    /// The hits whose bank is readable, best first.
    fn readable_hits(
        &self,
        searcher: &Searcher,
        top: Vec<(f32, tantivy::DocAddress)>,
        readable: &[u64],
    ) -> Result<Vec<LexicalHit>> {
        let mut hits = Vec::with_capacity(top.len());
        // Columns opened once per segment, not once per hit.
        let mut columns = HashMap::new();
        for (score, address) in top {
            let (bank, seq) = match columns.entry(address.segment_ord) {
                Entry::Occupied(open) => open.into_mut(),
                Entry::Vacant(slot) => {
                    let fast = searcher.segment_reader(address.segment_ord).fast_fields();
                    slot.insert((fast.u64("bank_key")?, fast.u64("seq")?))
                }
            };
            if !bank
                .first(address.doc_id)
                .is_some_and(|b| readable.contains(&b))
            {
                continue;
            }
            let seq = seq.first(address.doc_id).ok_or_else(|| {
                IndexerError::corrupt(
                    format!("lexical index at {}", self.path.display()),
                    "document without a sequence number",
                )
            })?;
            hits.push(LexicalHit {
                seq,
                score: steady(score),
            });
        }
        Ok(hits)
    }

    /// Σ idf over `text`'s distinct terms with the tenant's statistics and
    /// tantivy's BM25 idf `ln(1 + (N − n + 0.5) / (n + 0.5))`; a term the
    /// tenant never used counts as n = 1.
    pub(crate) fn attainable(&self, tenant: &str, text: &str) -> Result<f32> {
        let searcher = self.reader.searcher();
        let statistics = TenantStatistics::new(&searcher, self.fields, tenant)?;
        let total = statistics.docs as f32;
        let mut sum = 0.0f32;
        for word in self.terms(text) {
            let term = Term::from_field_text(self.fields.text, &tenant_word(tenant, &word));
            let n = (searcher.doc_freq(&term)? as f32).max(1.0);
            sum += (1.0 + (total - n + 0.5).max(0.0) / (n + 0.5)).ln();
        }
        Ok(sum)
    }

    /// Whether a live document of `tenant` in one of `banks` holds every
    /// term of `word` (analyzed as the index is: lowercased, stemmed). A
    /// word that analyzes to nothing (a stop word) counts as mentioned.
    /// Reads the last commit (a recall's BM25 search, which runs first,
    /// commits what is pending); stops at the first live document, so a
    /// common word costs no more than a rare one.
    pub(crate) fn mentions(&self, tenant: &str, banks: &[&str], word: &str) -> Result<bool> {
        let terms = self.terms(word);
        if terms.is_empty() {
            return Ok(true);
        }
        if banks.is_empty() {
            return Ok(false);
        }
        let term_query = |field, text: &str| -> Box<dyn Query> {
            let term = Term::from_field_text(field, text);
            Box::new(TermQuery::new(term, IndexRecordOption::Basic))
        };
        let scopes = banks
            .iter()
            .map(|b| {
                (
                    Occur::Should,
                    term_query(self.fields.scope, &scope_term(tenant, b)),
                )
            })
            .collect();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                (
                    Occur::Must,
                    term_query(self.fields.text, &tenant_word(tenant, t)),
                )
            })
            .collect();
        clauses.push((Occur::Must, Box::new(BooleanQuery::new(scopes))));
        let searcher = self.reader.searcher();
        let weight =
            BooleanQuery::new(clauses).weight(EnableScoring::disabled_from_searcher(&searcher))?;
        for segment in searcher.segment_readers() {
            let mut docs = weight.scorer(segment, 1.0)?;
            let mut doc = docs.doc();
            while doc != TERMINATED {
                if !segment.is_deleted(doc) {
                    return Ok(true);
                }
                doc = docs.advance();
            }
        }
        Ok(false)
    }

    /// Documents of `tenant` holding each of `text`'s terms, summed over
    /// its distinct terms, counted as tantivy's statistics count them:
    /// deleted documents too, until their segment is merged (which is why
    /// an erasure merges, and why this is the check that one did).
    pub(crate) fn doc_freq(&self, tenant: &str, text: &str) -> Result<u64> {
        let searcher = self.reader.searcher();
        let mut sum = 0;
        for word in self.terms(text) {
            let term = Term::from_field_text(self.fields.text, &tenant_word(tenant, &word));
            sum += searcher.doc_freq(&term)?;
        }
        Ok(sum)
    }

    /// `text` analyzed, each token qualified by the tenant.
    fn tenant_tokens(&self, tenant: &str, text: &str) -> PreTokenizedString {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while stream.advance() {
            let token = stream.token();
            tokens.push(Token {
                text: tenant_word(tenant, &token.text),
                offset_from: token.offset_from,
                offset_to: token.offset_to,
                position: token.position,
                position_length: token.position_length,
            });
        }
        PreTokenizedString {
            text: String::new(),
            tokens,
        }
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
        state.writer()?.delete_all_documents()?;
        state.added_seq = 0;
        state.dirty = true;
        self.commit_locked(&mut state)
    }
}

/// BM25 statistics of one tenant: its document count and its share of the
/// index's tokens. (Document frequencies are the tenant's already: its
/// terms are its own.)
struct TenantStatistics<'a> {
    searcher: &'a Searcher,
    docs: u64,
}

impl<'a> TenantStatistics<'a> {
    fn new(searcher: &'a Searcher, fields: Fields, tenant: &str) -> Result<TenantStatistics<'a>> {
        let docs = searcher.doc_freq(&Term::from_field_text(fields.tenant, tenant))?;
        Ok(TenantStatistics { searcher, docs })
    }
}

impl Bm25StatisticsProvider for TenantStatistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        // The index-wide average length, kept with the tenant's count.
        let tokens = self.searcher.total_num_tokens(field)?;
        let all = self.searcher.total_num_docs()?.max(1);
        Ok((tokens as u128 * self.docs as u128 / all as u128) as u64)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs.max(1))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher.doc_freq(term)
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

/// The index's directory; its writes under the fault layer when the
/// `faults` feature is on (see [`crate::faults`]).
fn directory(dir: &Path) -> Result<Box<dyn tantivy::Directory>> {
    let mmap = MmapDirectory::open(dir).map_err(tantivy::TantivyError::from)?;
    #[cfg(feature = "faults")]
    return Ok(Box::new(crate::faults::lexical_dir::FaultDir::new(
        mmap, dir,
    )));
    #[cfg(not(feature = "faults"))]
    Ok(Box::new(mmap))
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
            sentences: Vec::new(),
        }
    }

    #[test]
    fn tied_hits_rank_by_sequence_whatever_the_segments() {
        // Twelve documents that score alike, two per segment: tantivy returns
        // a tie in segment order, and segments are named at random.
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        for first in (1..13u64).step_by(2) {
            let rows: Vec<MemoryRow> = (first..first + 2)
                .map(|seq| row(seq, "acme", "org", "billing retries the export"))
                .collect();
            index.add(&rows.iter().collect::<Vec<_>>()).unwrap();
            index.commit().unwrap();
        }
        let other = row(13, "acme", "org", "billing export retries the export again");
        index.add(&[&other]).unwrap();
        let hits = index
            .search("acme", &["org"], "billing export", 20)
            .unwrap();
        let seqs: Vec<u64> = hits.iter().map(|h| h.seq).collect();
        assert_eq!(
            seqs,
            vec![13, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            "{hits:?}"
        );
    }

    #[test]
    fn steady_scores_absorb_ulps_and_keep_real_differences() {
        // 24 sits mid-way between rounding boundaries; its neighbours an ulp
        // or two away round to it.
        let s = 24.0f32;
        for ulps in [1, 2] {
            assert_eq!(steady(f32::from_bits(s.to_bits() + ulps)), s);
            assert_eq!(steady(f32::from_bits(s.to_bits() - ulps)), s);
        }
        assert!(steady(s * 1.001) > steady(s));
        let x = 30.3f32;
        assert!((steady(x) - x).abs() <= x / 4096.0);
        assert_eq!(steady(0.0), 0.0);
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
    fn a_word_is_mentioned_only_in_the_tenant_and_banks_that_hold_it() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let a = row(1, "acme", "org", "Caroline moved the billing jobs");
        let b = row(2, "other", "org", "Melanie paints");
        let c = row(3, "acme", "user:bob", "Gina opened a store");
        index.add(&[&a, &b, &c]).unwrap();
        index.commit().unwrap();
        let mentions = |banks: &[&str], word| index.mentions("acme", banks, word).unwrap();
        assert!(mentions(&["org"], "Caroline"));
        assert!(mentions(&["org"], "CAROLINE"), "case does not matter");
        assert!(mentions(&["org"], "Billings"), "stemmed as BM25 reads it");
        assert!(!mentions(&["org"], "Melanie"), "another tenant's word");
        assert!(
            !mentions(&["org"], "Gina"),
            "a bank this caller may not read"
        );
        assert!(mentions(&["org", "user:bob"], "Gina"));
        assert!(mentions(&["org"], "The"), "a stop word is no name");
        assert!(!mentions(&[], "Caroline"));
        index
            .erase(&EraseSelector::Memories {
                tenant: "acme".into(),
                ids: vec!["id1".into()],
            })
            .unwrap();
        assert!(!mentions(&["org"], "Caroline"), "an erased memory's word");
    }

    #[test]
    fn another_tenants_documents_do_not_change_a_tenants_scores() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let mine = [
            row(1, "acme", "org", "ledger export retries twice"),
            row(2, "acme", "org", "billing cron runs nightly"),
        ];
        index.add(&mine.iter().collect::<Vec<_>>()).unwrap();
        let before = index.search("acme", &["org"], "ledger export", 10).unwrap();
        let before_ceiling = index.attainable("acme", "ledger export").unwrap();
        // Same length (the average length is index-wide), same words: under
        // index-wide document frequencies these would make "ledger" common
        // and lower acme's score.
        let theirs: Vec<MemoryRow> = (0..50)
            .map(|i| row(10 + i, "other", "org", "ledger export retries thrice"))
            .collect();
        index.add(&theirs.iter().collect::<Vec<_>>()).unwrap();
        let after = index.search("acme", &["org"], "ledger export", 10).unwrap();
        assert_eq!(before.len(), 1);
        assert_eq!(after, before);
        assert_eq!(
            index.attainable("acme", "ledger export").unwrap(),
            before_ceiling
        );
    }

    #[test]
    fn a_readable_bank_is_found_under_many_better_matches_in_unreadable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let mut rows: Vec<MemoryRow> = (0..500)
            .map(|i| row(i + 1, "acme", "user:bob", "deploy deploy deploy cache"))
            .collect();
        rows.push(row(
            1000,
            "acme",
            "org",
            "deploy notes for the cache layer and more words",
        ));
        index.add(&rows.iter().collect::<Vec<_>>()).unwrap();
        let hits = index.search("acme", &["org"], "deploy cache", 5).unwrap();
        assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), vec![1000]);
        let both = index
            .search("acme", &["org", "user:bob"], "deploy cache", 5)
            .unwrap();
        assert_eq!(both.len(), 5);
        assert!(
            both.iter().all(|h| h.seq != 1000),
            "bob's stronger matches first"
        );
    }

    #[test]
    fn a_search_of_some_banks_finds_their_best_matches_whatever_their_share() {
        // Banks holding 1,361, 900, 59 and no documents of one tenant, and
        // a query every document matches to some degree: however small a
        // share of the tenant the readable banks hold, the hits are their
        // best matches, as a search of every bank filtered afterwards says.
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        let bank_of = |seq: u64| match seq % 1_000 {
            0..=19 => "c",
            20..=319 => "b",
            _ => "a",
        };
        let rows: Vec<MemoryRow> = (1..=2_320u64)
            .map(|seq| {
                let text = format!(
                    "{}cache {}note {seq}",
                    "deploy ".repeat(1 + (seq % 5) as usize),
                    "filler ".repeat((seq % 7) as usize)
                );
                row(seq, "acme", bank_of(seq), &text)
            })
            .collect();
        index.add(&rows.iter().collect::<Vec<_>>()).unwrap();
        let all = index
            .search("acme", &["a", "b", "c"], "deploy cache", 5_000)
            .unwrap();
        assert_eq!(all.len(), 2_320);
        for banks in [&["a"][..], &["b"], &["c"], &["b", "c"], &["a", "c"], &["d"]] {
            for limit in [1, 10, 40] {
                let hits = index.search("acme", banks, "deploy cache", limit).unwrap();
                assert!(hits.iter().all(|h| banks.contains(&bank_of(h.seq))));
                let scores =
                    |hits: &[LexicalHit]| -> Vec<f32> { hits.iter().map(|h| h.score).collect() };
                let best: Vec<LexicalHit> = all
                    .iter()
                    .filter(|h| banks.contains(&bank_of(h.seq)))
                    .take(limit)
                    .cloned()
                    .collect();
                assert_eq!(scores(&hits), scores(&best), "{banks:?}, {limit}");
            }
        }
    }

    #[test]
    fn after_waiting_for_merges_the_index_is_merged_and_takes_writes() {
        let dir = tempfile::tempdir().unwrap();
        let index = LexicalIndex::open(dir.path()).unwrap();
        // One segment per commit: enough of them for the merge policy.
        for seq in 1..=12u64 {
            index
                .add(&[&row(seq, "t", "b", &format!("alpha note {seq}"))])
                .unwrap();
            index.commit().unwrap();
        }
        index.wait_for_merges().unwrap();
        let segments = index.reader.searcher().segment_readers().len();
        assert!(segments < 12, "merged into {segments} segments");
        assert_eq!(index.search("t", &["b"], "alpha", 20).unwrap().len(), 12);
        // The fresh writer continues the sequence.
        index.add(&[&row(13, "t", "b", "alpha late")]).unwrap();
        assert_eq!(index.indexed_seq().unwrap(), 13);
        index.commit().unwrap();
        assert_eq!(index.search("t", &["b"], "alpha", 20).unwrap().len(), 13);
        drop(index);
        assert_eq!(
            committed_seq(&Index::open_in_dir(dir.path()).unwrap()).unwrap(),
            13
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

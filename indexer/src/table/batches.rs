//! Rows to Arrow record batches and back: the tables' schemas and the
//! conversions `Tables` appends and loads with (no IO here).

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, FixedSizeListArray, Float32Array, Int64Array, RecordBatch,
    StringArray, UInt64Array,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::error::{IndexerError, Result};
use crate::rows::{EventRow, MemoryRow};

use super::{EVENTS, MEMORIES, SENTENCES};

pub(super) fn memory_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("id", DataType::Utf8, false),
        Field::new("tenant", DataType::Utf8, false),
        Field::new("bank", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, true),
        Field::new("content", DataType::Utf8, false),
        Field::new(
            "elements",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        Field::new("source", DataType::Utf8, false),
        Field::new("trust", DataType::Utf8, false),
        Field::new("agent", DataType::Utf8, true),
        Field::new("session_id", DataType::Utf8, true),
        Field::new("confidence", DataType::Float32, false),
        Field::new("observed_at_ms", DataType::Int64, false),
        Field::new("created_at_ms", DataType::Int64, false),
        Field::new("expires_at_ms", DataType::Int64, true),
        Field::new("supersedes", DataType::Utf8, true),
        vector_field(dim),
        sentences_field(),
    ]))
}

/// The sentence vectors of a memory ([`MemoryRow::sentences`]) as one
/// binary value: the vectors' little-endian `f32`s end to end, null when
/// there are none. A list of fixed-size lists would say the same at more
/// cost per row; the width is the vector column's.
pub(super) fn sentences_field() -> Field {
    Field::new(SENTENCES, DataType::Binary, true)
}

fn vector_field(dim: usize) -> Field {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    Field::new("vector", DataType::FixedSizeList(item, dim as i32), true)
}

pub(super) fn vector_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("tenant", DataType::Utf8, false),
        Field::new("memory_id", DataType::Utf8, false),
        vector_field(dim),
        sentences_field(),
    ]))
}

pub(super) fn event_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("tenant", DataType::Utf8, false),
        Field::new("memory_id", DataType::Utf8, false),
        Field::new("op", DataType::Utf8, false),
        Field::new("at_ms", DataType::Int64, false),
        Field::new("arg", DataType::Utf8, true),
    ]))
}

/// The sentence column of a batch: each row's vectors end to end, null for none.
pub(super) fn sentences_array<'a>(rows: impl Iterator<Item = &'a Vec<Vec<f32>>>) -> BinaryArray {
    rows.map(|sentences| {
        (!sentences.is_empty()).then(|| {
            sentences
                .iter()
                .flatten()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>()
        })
    })
    .collect()
}

/// The vector column from one flat buffer (rows without a vector are null
/// and zero-filled): one copy per row instead of an iterator per float.
pub(super) fn vector_array<'a>(
    vectors: impl Iterator<Item = Option<&'a [f32]>>,
    rows: usize,
    dim: usize,
) -> Result<FixedSizeListArray> {
    let mut flat = Vec::with_capacity(rows * dim);
    let mut valid = Vec::with_capacity(rows);
    for vector in vectors {
        match vector {
            Some(v) => flat.extend_from_slice(v),
            None => flat.resize(flat.len() + dim, 0.0),
        }
        valid.push(vector.is_some());
    }
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let nulls = valid.iter().any(|v| !v).then(|| NullBuffer::from(valid));
    FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(flat)), nulls)
        .map_err(|e| IndexerError::corrupt("vector column", e.to_string()))
}

pub(super) fn memories_to_batch(rows: &[&MemoryRow], dim: usize) -> Result<RecordBatch> {
    let text = |f: fn(&MemoryRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| f(r))))
    };
    let opt_text = |f: fn(&MemoryRow) -> Option<&str>| -> ArrayRef {
        Arc::new(rows.iter().map(|r| f(r)).collect::<StringArray>())
    };
    let mut elements = ListBuilder::new(StringBuilder::new());
    for row in rows {
        for element in &row.elements {
            elements.values().append_value(element);
        }
        elements.append(true);
    }
    for row in rows {
        if let Some(v) = &row.vector {
            check_width(v, dim)?;
        }
        for v in &row.sentences {
            check_width(v, dim)?;
        }
    }
    let sentences = sentences_array(rows.iter().map(|r| &r.sentences));
    let vectors = vector_array(rows.iter().map(|r| r.vector.as_deref()), rows.len(), dim)?;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.seq))),
        text(|r| &r.id),
        text(|r| &r.tenant),
        text(|r| &r.bank),
        text(|r| &r.kind),
        opt_text(|r| r.title.as_deref()),
        text(|r| &r.content),
        Arc::new(elements.finish()),
        text(|r| &r.source),
        text(|r| &r.trust),
        opt_text(|r| r.agent.as_deref()),
        opt_text(|r| r.session_id.as_deref()),
        Arc::new(Float32Array::from_iter_values(
            rows.iter().map(|r| r.confidence),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.observed_at_ms),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.created_at_ms),
        )),
        Arc::new(rows.iter().map(|r| r.expires_at_ms).collect::<Int64Array>()),
        opt_text(|r| r.supersedes.as_deref()),
        Arc::new(vectors),
        Arc::new(sentences),
    ];
    RecordBatch::try_new(memory_schema(dim), columns)
        .map_err(|e| IndexerError::corrupt("memory batch", e.to_string()))
}

pub(super) fn check_width(v: &[f32], dim: usize) -> Result<()> {
    if v.len() != dim {
        return Err(IndexerError::Embedding(format!(
            "vector of {} floats for a {dim}-float table",
            v.len()
        )));
    }
    Ok(())
}

pub(super) fn events_to_batch(rows: &[&EventRow]) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.seq))),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.tenant.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.memory_id.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.op.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.at_ms))),
        Arc::new(
            rows.iter()
                .map(|r| r.arg.as_deref())
                .collect::<StringArray>(),
        ),
    ];
    RecordBatch::try_new(event_schema(), columns)
        .map_err(|e| IndexerError::corrupt("event batch", e.to_string()))
}

/// Typed column access that reports a damaged table instead of panicking.
pub(super) struct Columns<'a> {
    pub(super) batch: &'a RecordBatch,
    pub(super) table: &'static str,
}

impl<'a> Columns<'a> {
    pub(super) fn get(&self, name: &str) -> Result<&'a ArrayRef> {
        self.batch
            .column_by_name(name)
            .ok_or_else(|| IndexerError::corrupt(self.table, format!("column `{name}` missing")))
    }
    pub(super) fn wrong(&self, name: &str) -> IndexerError {
        IndexerError::corrupt(self.table, format!("column `{name}` has the wrong type"))
    }
    pub(super) fn text(&self, name: &str) -> Result<&'a StringArray> {
        self.get(name)?
            .as_string_opt::<i32>()
            .ok_or_else(|| self.wrong(name))
    }
    pub(super) fn u64(&self, name: &str) -> Result<&'a UInt64Array> {
        self.get(name)?
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| self.wrong(name))
    }
    pub(super) fn i64(&self, name: &str) -> Result<&'a Int64Array> {
        self.get(name)?
            .as_primitive_opt::<Int64Type>()
            .ok_or_else(|| self.wrong(name))
    }
    pub(super) fn f32(&self, name: &str) -> Result<&'a Float32Array> {
        self.get(name)?
            .as_primitive_opt::<Float32Type>()
            .ok_or_else(|| self.wrong(name))
    }
}

/// The vector in row `i` of a `FixedSizeList<Float32>` column (None when null).
pub(super) fn vector_at(
    vectors: &FixedSizeListArray,
    i: usize,
    c: &Columns<'_>,
) -> Result<Option<Vec<f32>>> {
    if !vectors.is_valid(i) {
        return Ok(None);
    }
    let values = vectors.value(i);
    let values = values
        .as_primitive_opt::<Float32Type>()
        .ok_or_else(|| c.wrong("vector"))?;
    Ok(Some(values.values().to_vec()))
}

/// The sentence vectors in row `i` of the binary sentence column (none
/// when null); a value that is not whole vectors is damage.
pub(super) fn sentences_at(
    sentences: &BinaryArray,
    i: usize,
    dim: usize,
    c: &Columns<'_>,
) -> Result<Vec<Vec<f32>>> {
    if !sentences.is_valid(i) || dim == 0 {
        return Ok(Vec::new());
    }
    let bytes = sentences.value(i);
    if !bytes.len().is_multiple_of(4 * dim) {
        return Err(c.wrong(SENTENCES));
    }
    Ok(bytes
        .chunks_exact(4 * dim)
        .map(|v| {
            v.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect())
}

fn opt_str(array: &StringArray, i: usize) -> Option<String> {
    array.is_valid(i).then(|| array.value(i).to_string())
}

/// The memory rows of `batch`, appended to `out`. A batch read without
/// the `vector` column ([`crate::StoreOptions::elide_vectors`]) gives rows
/// without vectors; `dim` is the table's vector width.
pub(super) fn batch_to_memories(
    batch: &RecordBatch,
    dim: usize,
    out: &mut Vec<MemoryRow>,
) -> Result<()> {
    let c = Columns {
        batch,
        table: MEMORIES,
    };
    let (seq, id, tenant, bank, kind) = (
        c.u64("seq")?,
        c.text("id")?,
        c.text("tenant")?,
        c.text("bank")?,
        c.text("kind")?,
    );
    let (title, content, source, trust) = (
        c.text("title")?,
        c.text("content")?,
        c.text("source")?,
        c.text("trust")?,
    );
    let (agent, session_id, supersedes) = (
        c.text("agent")?,
        c.text("session_id")?,
        c.text("supersedes")?,
    );
    let confidence = c.f32("confidence")?;
    let (observed, created, expires) = (
        c.i64("observed_at_ms")?,
        c.i64("created_at_ms")?,
        c.i64("expires_at_ms")?,
    );
    let elements = c
        .get("elements")?
        .as_list_opt::<i32>()
        .ok_or_else(|| c.wrong("elements"))?;
    let vectors = match batch.column_by_name("vector") {
        Some(vectors) => Some(
            vectors
                .as_fixed_size_list_opt()
                .ok_or_else(|| c.wrong("vector"))?,
        ),
        None => None,
    };
    let dim = vectors.map_or(dim, |v| v.value_length() as usize);
    let sentences = c
        .get(SENTENCES)?
        .as_binary_opt::<i32>()
        .ok_or_else(|| c.wrong(SENTENCES))?;
    for i in 0..batch.num_rows() {
        let element_values = elements.value(i);
        let element_values = element_values
            .as_string_opt::<i32>()
            .ok_or_else(|| c.wrong("elements"))?;
        let vector = match vectors {
            Some(vectors) => vector_at(vectors, i, &c)?,
            None => None,
        };
        let sentences = sentences_at(sentences, i, dim, &c)?;
        out.push(MemoryRow {
            seq: seq.value(i),
            id: id.value(i).to_string(),
            tenant: tenant.value(i).to_string(),
            bank: bank.value(i).to_string(),
            kind: kind.value(i).to_string(),
            title: opt_str(title, i),
            content: content.value(i).to_string(),
            elements: element_values
                .iter()
                .flatten()
                .map(str::to_string)
                .collect(),
            source: source.value(i).to_string(),
            trust: trust.value(i).to_string(),
            agent: opt_str(agent, i),
            session_id: opt_str(session_id, i),
            confidence: confidence.value(i),
            observed_at_ms: observed.value(i),
            created_at_ms: created.value(i),
            expires_at_ms: expires.is_valid(i).then(|| expires.value(i)),
            supersedes: opt_str(supersedes, i),
            vector,
            sentences,
        });
    }
    Ok(())
}

pub(super) fn batch_to_events(batch: &RecordBatch, out: &mut Vec<EventRow>) -> Result<()> {
    let c = Columns {
        batch,
        table: EVENTS,
    };
    let (seq, tenant, memory_id, op, at, arg) = (
        c.u64("seq")?,
        c.text("tenant")?,
        c.text("memory_id")?,
        c.text("op")?,
        c.i64("at_ms")?,
        c.text("arg")?,
    );
    for i in 0..batch.num_rows() {
        out.push(EventRow {
            seq: seq.value(i),
            tenant: tenant.value(i).to_string(),
            memory_id: memory_id.value(i).to_string(),
            op: op.value(i).to_string(),
            at_ms: at.value(i),
            arg: opt_str(arg, i),
        });
    }
    Ok(())
}

//! The polars kernels the compiled filters call: a nested struct leaf read in place (not through
//! `struct.field`, which builds every sibling), and a list of strings searched for one string,
//! or for any of a set, in one pass over each chunk.

use polars::prelude::*;

/// The value at `column.inner[0].inner[1]...` of a struct column, null where it or one of its
/// parents is null.
///
/// polars' `struct.field` builds every sibling field of the struct and pushes the struct's
/// nulls into each of them (a profile's `metrics` holds 7 windows of about 50 numbers); this
/// reads the one leaf array of each chunk and combines the parents' validity into it.
pub(super) fn nested_value(column: &str, inner: Vec<PlSmallStr>, dtype: DataType) -> Expr {
    let name = inner.last().cloned().unwrap_or_default();
    let out = Field::new(name.clone(), dtype.clone());
    col(column).map(
        move |c: Column| nested_leaf(&c, &inner, &dtype, &name),
        move |_, _| Ok(out.clone()),
    )
}

fn nested_leaf(
    column: &Column,
    inner: &[PlSmallStr],
    dtype: &DataType,
    name: &PlSmallStr,
) -> PolarsResult<Column> {
    use polars_arrow::array::{Array, StructArray};
    use polars_arrow::compute::utils::combine_validities_and;

    let series = column.as_materialized_series();
    let outer = series.struct_()?;
    let mut chunks = Vec::with_capacity(outer.chunks().len());
    // The leaf's type in this frame, which may differ from the schema the filter was compiled
    // for (`filter_expr` runs on any frame of profiles).
    let mut found = dtype;
    for chunk in outer.chunks() {
        let mut array: &dyn Array = chunk.as_ref();
        let mut level = outer.dtype();
        let mut validity = None;
        for segment in inner {
            let DataType::Struct(fields) = level else {
                polars_bail!(SchemaMismatch: "{segment} is not inside a struct");
            };
            let Some(i) = fields.iter().position(|f| f.name() == segment) else {
                polars_bail!(StructFieldNotFound: "{segment}");
            };
            let Some(parent) = array.as_any().downcast_ref::<StructArray>() else {
                polars_bail!(SchemaMismatch: "{segment}: the parent array is not a struct");
            };
            validity = combine_validities_and(validity.as_ref(), parent.validity());
            array = parent.values()[i].as_ref();
            level = fields[i].dtype();
        }
        let validity = combine_validities_and(validity.as_ref(), array.validity());
        chunks.push(array.with_validity(validity));
        found = level;
    }
    // SAFETY: the chunks are the arrays of the struct field whose dtype is `found`.
    let leaf = unsafe { Series::from_chunks_and_dtype_unchecked(name.clone(), chunks, found) };
    let leaf = if found == dtype {
        leaf
    } else {
        leaf.cast(dtype)?
    };
    Ok(leaf.into_column())
}

/// Whether a list of strings holds one of `needles`: null where the list is null, as polars'
/// `list.contains` (which goes through `is_in` row by row, with a lookup per row; this compares
/// the elements of each chunk in one pass, against a hash set of the needles when they are
/// several).
pub(super) fn list_contains(list: Expr, needles: Vec<String>) -> Expr {
    let needles = Needles::new(needles);
    list.map(
        move |c: Column| list_contains_column(&c, &needles),
        |_, field| Ok(Field::new(field.name().clone(), DataType::Boolean)),
    )
}

/// The strings a list is searched for.
enum Needles {
    /// One string: an element of another length is rejected from its view alone.
    One { needle: String, length: u32 },
    /// Several (or none): a hash set.
    Many(PlHashSet<String>),
}

impl Needles {
    fn new(needles: Vec<String>) -> Self {
        // A string of over 4 GiB has no view length; it goes in a set.
        if let [needle] = needles.as_slice()
            && let Ok(length) = u32::try_from(needle.len())
        {
            return Needles::One {
                needle: needle.clone(),
                length,
            };
        }
        Needles::Many(needles.into_iter().collect())
    }
}

fn list_contains_column(column: &Column, needles: &Needles) -> PolarsResult<Column> {
    use polars_arrow::array::{Array, BooleanArray, ListArray, Utf8ViewArray};
    use polars_arrow::bitmap::MutableBitmap;
    use rayon::prelude::*;

    // A frame's lists of another element type (categories, say) are compared as strings.
    let strings = DataType::List(Box::new(DataType::String));
    let series = column.as_materialized_series();
    let series = if series.dtype() == &strings {
        series.clone()
    } else {
        series.cast(&strings)?
    };
    let lists = series.list()?;
    let arrays: Vec<&ListArray<i64>> = lists.downcast_iter().collect();
    // One task per chunk (a file or a row group of the lake).
    let chunks = arrays
        .par_iter()
        .map(|list| -> PolarsResult<BooleanArray> {
            let Some(values) = list.values().as_any().downcast_ref::<Utf8ViewArray>() else {
                polars_bail!(SchemaMismatch: "expected a list of strings");
            };
            let offsets = list.offsets().buffer();
            let views = values.views();
            let found = |j: usize| match needles {
                Needles::One { needle, length } => {
                    views[j].length == *length && values.is_valid(j) && values.value(j) == needle
                }
                Needles::Many(set) => values.is_valid(j) && set.contains(values.value(j)),
            };
            let mut hits = MutableBitmap::with_capacity(list.len());
            for bounds in offsets.windows(2) {
                let (start, end) = (bounds[0] as usize, bounds[1] as usize);
                hits.push((start..end).any(found));
            }
            Ok(BooleanArray::new(
                polars_arrow::datatypes::ArrowDataType::Boolean,
                hits.into(),
                list.validity().cloned(),
            ))
        })
        .collect::<PolarsResult<Vec<BooleanArray>>>()?;
    let out = BooleanChunked::from_chunk_iter(series.name().clone(), chunks);
    Ok(out.into_series().into_column())
}

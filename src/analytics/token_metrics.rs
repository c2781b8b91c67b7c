//! Token profile metrics (placeholder while being written).

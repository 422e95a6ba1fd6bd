//! `attention_cte`: prefill flash attention.

pub mod attention_cte;

"""Reading records: run tables, final returns, intervals and verdicts, reference scores, and
the figures drawn from them."""

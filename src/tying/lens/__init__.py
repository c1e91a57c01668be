"""The tuned lens: translators, fitting, held-out scoring, the convergence certificate, the readout."""

# The claims by exposure (tables.claims_by_exposure; tying.claims.exposure): the trained pairs' per-token claims
# within strata of how often their runs drew each token, as results/tables/claims_by_exposure.{csv,md} and
# figures/claims_by_exposure.pdf.


rule claims_by_exposure:
    input:
        unpack(lambda w: exposure_inputs(table_pairs("claims_by_exposure"))),
    output:
        csv=report("results/tables/claims_by_exposure.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_by_exposure.md",
        figure=report("figures/claims_by_exposure.pdf", caption="../report/claims_by_exposure.rst",
                      category="Figures"),
    params:
        **exposure_params(lambda w: table_pairs("claims_by_exposure")),
    log:
        "logs/tables/claims_by_exposure.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_by_exposure.py"

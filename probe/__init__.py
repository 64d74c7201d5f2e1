"""probe/: linear probes on a run's stored frozen features (issue 15; ImageNet-CoG, ELEVATER).

- :mod:`probe.linear`: multinomial logistic regression on L2-normalised features (L-BFGS, an L2
  penalty towards a prior head), ``C`` chosen by ``GridSearchCV`` on a validation split.
- :mod:`probe.fewshot`: N-shot draws per seed (train/test disjoint, per-class caps) and the sweep.
- :mod:`probe.data`: what a probe reads from a run (usable images' features, the text classifier).
- :mod:`probe.duplicates`: near-duplicate groups (pHash), kept on one side of every split.
- :mod:`probe.issues`: cleanlab's label issues on out-of-fold probe probabilities.
- :mod:`probe.artefact`: ``probes/`` under a run; :func:`run_probes`, :func:`run_label_issues`.

``python -m probe --run RUN_ID --models M1,M2 [--shots 1,2,4,8] [--seeds 22,37,45] [--label-issues]``.
A stage: imports ``core`` and itself only.
"""

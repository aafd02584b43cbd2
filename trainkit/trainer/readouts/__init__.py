"""The Trainer's Lightning-named read-outs (``trainer.current_epoch``, ``trainer.callbacks``...),
one class per concept, each defined once and inherited by the ``Trainer``: what runs now
(``status.py``), where the loop is (``position.py``), the loop limits (``limits.py``), the stages'
loaders (``loaders.py``), the parts a stage drives (``parts.py``), the callbacks
(``callbacks.py``), the loggers and metrics (``loggers.py``), the ranks (``ranks.py``) and the
Trainer's own settings (``settings.py``). Each reads the run state the Trainer owns; adding a
read-out is one property in one of them."""

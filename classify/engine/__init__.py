"""classify/engine/: how images become prediction rows, on this machine or on Ray: the shared data
(``types``), device and precision policy, decode and crops, backends, and the engine choice (``dispatch``)."""

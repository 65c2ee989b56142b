target_sources(tessera_engine PRIVATE output_processor.cpp engine_impl.cpp engine_loop.cpp engine_step.cpp
  engine_grammar.cpp)
target_link_libraries(tessera_engine PUBLIC tessera_runner tessera_sched tessera_tokenizer tessera_spec tessera_model
  tessera_grammar)
# Speculative decoding (owner: spec): draft proposals after each step, n-gram or draft model.
target_sources(tessera_engine PRIVATE engine_spec.cpp)

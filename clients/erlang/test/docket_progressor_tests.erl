%% docket_progressor against a real `docket serve` (DOCKET_SERVER) and a real processor:
%% docket_progressor_test_processor served by docket_progressor_processor. Every assertion
%% is a pattern match on what the server answered. Run by test.sh; prints one line per test
%% and "N passed, N failed".
-module(docket_progressor_tests).

-export([main/0]).

-define(P, docket_progressor).
-define(PP, docket_progressor_processor).

main() ->
    ets:new(docket_progressor_seen, [named_table, public, duplicate_bag]),
    {ok, Httpd} = docket_progressor_processor:start(#{handler => {docket_progressor_test_processor, []}}),
    Url = "http://127.0.0.1:" ++ integer_to_list(docket_progressor_processor:port(Httpd)) ++ "/",
    Ns = list_to_atom("erl_" ++ integer_to_list(erlang:system_time(millisecond))),
    {ok, #{<<"name">> := _}} = ?P:put_namespace(Ns, #{
        processor => #{url => list_to_binary(Url)},
        retry_policy => #{max_attempts => 1},
        process_step_timeout => <<"10s">>
    }),
    Tests = [
        init, get_during_init, call_with_response, concurrent_calls, errors,
        repair_of_errored_process, simple_repair, get_with_ranges, put, put_with_timers, trace,
        idempotency_keys, health_check, ids_and_config, tls_and_token,
        start_namespaces_config_errors, start_namespaces
    ],
    Results = [run(T, Ns) || T <- Tests],
    Passed = length([ok || ok <- Results]),
    Failed = length(Results) - Passed,
    io:format("~b passed, ~b failed~n", [Passed, Failed]),
    halt(case Failed of 0 -> 0; _ -> 1 end).

run(Name, Ns) ->
    T0 = erlang:monotonic_time(millisecond),
    try test(Name, Ns) of
        skip ->
            io:format("ok   ~s (skipped: ~s)~n", [Name, skip_reason(Name)]),
            ok;
        _ ->
            io:format("ok   ~s (~b ms)~n", [Name, erlang:monotonic_time(millisecond) - T0]),
            ok
    catch
        Class:Reason:Stack ->
            io:format("FAIL ~s: ~p:~p~n     ~p~n", [Name, Class, Reason, Stack]),
            failed
    end.

skip_reason(tls_and_token) -> "DOCKET_TEST_TLS_URL not set".

%%% The tests

test(init, Ns) ->
    Id = id(),
    Args = step(#{}),
    Ctx = bin(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id, args => Args, context => Ctx}),
    %% the processor got the very bytes of args and context
    [{Id, init, Args, Ctx, #{process_id := Id, history := []}}] = seen(Id),
    {error, <<"process already exists">>} = ?P:init(#{ns => Ns, id => Id, args => Args}),
    {ok, #{process_id := Id, status := <<"running">>, history := [], last_event_id := 0}} =
        ?P:get(#{ns => Ns, id => Id}),
    %% no args and no context: the processor gets <<>> for both, as progressor gives them
    Id2 = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id2}),
    [{Id2, init, <<>>, <<>>, _}] = seen(Id2),
    %% a response
    Id3 = id(),
    Resp = bin(),
    {ok, Resp} = ?P:init(#{ns => Ns, id => Id3, args => step(#{response => Resp})});
test(get_during_init, Ns) ->
    %% progressor's get waits while the init step runs (its task_race_condition_hack_test)
    Id = id(),
    E = bin(),
    Self = self(),
    spawn_link(fun() ->
        Self ! {init_done, ?P:init(#{ns => Ns, id => Id, args => step(#{sleep => 1500, events => [E]})})}
    end),
    wait(fun() -> [_] = seen(Id) end),
    {ok, #{status := <<"init">>, history := []}} = ?P:get(#{ns => Ns, id => Id, options => #{init_wait => 0}}),
    {ok, #{status := <<"running">>, history := [#{event_id := 1, payload := E}], last_event_id := 1}} =
        ?P:get(#{ns => Ns, id => Id}),
    receive {init_done, {ok, ok}} -> ok after 5000 -> error(init_not_done) end;
test(call_with_response, Ns) ->
    Id = id(),
    [E1, E2, A1, A2, Resp] = [bin() || _ <- lists:seq(1, 5)],
    {ok, ok} = ?P:init(#{ns => Ns, id => Id, args => step(#{
        events => [E1], aux => A1, metadata => #{<<"k">> => <<"v">>}
    })}),
    CallArgs = step(#{events => [E2], response => Resp, aux => A2}),
    {ok, Resp} = ?P:call(#{ns => Ns, id => Id, args => CallArgs}),
    {ok, #{
        process_id := Id,
        status := <<"running">>,
        aux_state := A2,
        metadata := #{<<"k">> := <<"v">>},
        last_event_id := 2,
        range := #{},
        history := [
            #{event_id := 1, payload := E1, metadata := #{<<"format_version">> := 1}, timestamp := T1},
            #{event_id := 2, payload := E2, metadata := #{<<"format_version">> := 1}}
        ]
    }} = ?P:get(#{ns => Ns, id => Id}),
    true = abs(T1 - erlang:system_time(second)) < 60,
    %% what the processor saw for the call: progressor's process map, binaries intact
    [_, {Id, call, CallArgs, <<>>, #{
        status := <<"running">>, aux_state := A1, last_event_id := 1,
        history := [#{event_id := 1, payload := E1}]
    }}] = seen(Id),
    %% any JSON-shaped term is carried too; binaries in it stay binaries
    {ok, #{<<"list">> := [1, E1, true, null]}} = ?P:call(#{ns => Ns, id => Id, args => step(#{
        response => #{list => [1, E1, true, null]}
    })});
test(concurrent_calls, Ns) ->
    %% calls from many Erlang processes at once: each answered, one step at a time per process
    Id = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id}),
    Self = self(),
    Payloads = [bin() || _ <- lists:seq(1, 8)],
    [spawn_link(fun() ->
        Self ! {called, P, ?P:call(#{ns => Ns, id => Id, args => step(#{sleep => 100, events => [P], response => P})})}
     end) || P <- Payloads],
    [receive {called, P, Result} -> {ok, P} = Result after 20000 -> error(call_timeout) end || P <- Payloads],
    {ok, #{history := H, last_event_id := 8}} = ?P:get(#{ns => Ns, id => Id}),
    Sorted = lists:sort(Payloads),
    Sorted = lists:sort([P || #{payload := P} <- H]);
test(errors, Ns) ->
    Id = id(),
    {error, <<"namespace not found">>} = ?P:call(#{ns => no_such_namespace, id => Id}),
    {error, <<"process not found">>} = ?P:call(#{ns => Ns, id => Id}),
    {error, <<"process not found">>} = ?P:get(#{ns => Ns, id => Id}),
    {error, <<"process not found">>} = ?P:trace(#{ns => Ns, id => Id}),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id}),
    %% an atom reason arrives as its text (JSON has no atoms)
    {error, <<"retry_this">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => retry_this})}),
    {ok, #{status := <<"error">>, previous_status := <<"running">>, detail := <<"retry_this">>}} =
        ?P:get(#{ns => Ns, id => Id}),
    {error, <<"process is error">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{})}),
    %% a binary reason arrives as the same bytes, in the call's error and in the detail
    Id2 = id(),
    Reason = bin(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id2}),
    {error, Reason} = ?P:call(#{ns => Ns, id => Id2, args => step(#{error => Reason})}),
    {ok, #{status := <<"error">>, detail := Reason}} = ?P:get(#{ns => Ns, id => Id2}),
    %% a failed init leaves the process in error too
    Id3 = id(),
    {error, <<"no">>} = ?P:init(#{ns => Ns, id => Id3, args => step(#{error => <<"no">>})}),
    {ok, #{status := <<"error">>, detail := <<"no">>}} = ?P:get(#{ns => Ns, id => Id3}),
    %% a crashing processor: the caller gets progressor's {exception, Class, Term}, printed
    Id4 = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id4}),
    {error, <<"{exception,error,boom}">>} = ?P:call(#{ns => Ns, id => Id4, args => step(#{crash => boom})}),
    {ok, #{status := <<"error">>, detail := <<"{exception,error,boom}">>}} = ?P:get(#{ns => Ns, id => Id4}),
    %% what JSON cannot carry is refused before anything is sent
    {error, {not_encodable, {a, tuple}}} = ?P:call(#{ns => Ns, id => Id, args => {a, tuple}});
test(repair_of_errored_process, Ns) ->
    Id = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id}),
    {error, <<"process is running">>} = ?P:repair(#{ns => Ns, id => Id, args => step(#{})}),
    {error, <<"broken">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => <<"broken">>})}),
    %% a failed repair leaves the process as it was
    {error, <<"still broken">>} =
        ?P:repair(#{ns => Ns, id => Id, args => step(#{error => <<"still broken">>})}),
    {ok, #{status := <<"error">>, detail := <<"broken">>}} = ?P:get(#{ns => Ns, id => Id}),
    [Resp, E, Ctx] = [bin() || _ <- lists:seq(1, 3)],
    RepairArgs = step(#{response => Resp, events => [E]}),
    {ok, Resp} = ?P:repair(#{ns => Ns, id => Id, args => RepairArgs, context => Ctx}),
    {ok, #{status := <<"running">>, history := [#{event_id := 1, payload := E}]} = P} =
        ?P:get(#{ns => Ns, id => Id}),
    false = maps:is_key(detail, P),
    {Id, repair, RepairArgs, Ctx, #{status := <<"error">>}} = lists:last(seen(Id)),
    {ok, ok} = ?P:call(#{ns => Ns, id => Id, args => step(#{})}),
    %% a process broken by a timer: a repair runs the timer again after it
    Id2 = id(),
    E2 = bin(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id2, args => step(#{timer => 0, timeouts => [#{error => <<"t">>}]})}),
    wait(fun() -> {ok, #{status := <<"error">>, corrupted_by := _}} = ?P:get(#{ns => Ns, id => Id2}) end),
    {ok, ok} = ?P:repair(#{ns => Ns, id => Id2, args => step(#{timeouts => [#{events => [E2]}]})}),
    wait(fun() ->
        {ok, #{status := <<"running">>, history := [#{payload := E2}]}} = ?P:get(#{ns => Ns, id => Id2})
    end),
    [init, timeout, repair, timeout] = [T || {_, T, _, _, _} <- seen(Id2)];
test(simple_repair, Ns) ->
    Id = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id}),
    {error, <<"process is running">>} = ?P:simple_repair(#{ns => Ns, id => Id}),
    {error, <<"boom">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => <<"boom">>})}),
    {ok, ok} = ?P:simple_repair(#{ns => Ns, id => Id}),
    {ok, #{status := <<"running">>, previous_status := <<"error">>} = P} = ?P:get(#{ns => Ns, id => Id}),
    false = maps:is_key(detail, P),
    %% the processor was not asked
    2 = length(seen(Id)),
    {ok, ok} = ?P:call(#{ns => Ns, id => Id, args => step(#{})}),
    {error, <<"process not found">>} = ?P:simple_repair(#{ns => Ns, id => id()}),
    %% a process broken by a timer: docket's simple-repair does not run the timer again
    %% (progressor's does)
    Id2 = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id2, args => step(#{timer => 0, timeouts => [#{error => <<"t">>}]})}),
    wait(fun() -> {ok, #{status := <<"error">>, corrupted_by := _}} = ?P:get(#{ns => Ns, id => Id2}) end),
    {ok, ok} = ?P:simple_repair(#{ns => Ns, id => Id2}),
    timer:sleep(1500),
    {ok, #{status := <<"running">>}} = ?P:get(#{ns => Ns, id => Id2}),
    [init, timeout] = [T || {_, T, _, _, _} <- seen(Id2)];
test(get_with_ranges, Ns) ->
    Id = id(),
    Es = [bin() || _ <- lists:seq(1, 5)],
    {ok, ok} = ?P:init(#{ns => Ns, id => Id, args => step(#{events => Es})}),
    Get = fun(Range) ->
        {ok, #{range := Range, last_event_id := 5, history := H}} =
            ?P:get(#{ns => Ns, id => Id, range => Range}),
        [{EventId, Payload} || #{event_id := EventId, payload := Payload} <- H]
    end,
    Expect = fun(Ids, Range) ->
        Want = [{N, lists:nth(N, Es)} || N <- Ids],
        Want = Get(Range)
    end,
    Expect([1, 2, 3, 4, 5], #{}),
    Expect([2, 3], #{offset => 1, limit => 2}),
    Expect([5], #{offset => 4}),
    Expect([], #{offset => 5}),
    Expect([], #{limit => 0}),
    Expect([3, 2, 1], #{offset => 4, direction => backward}),
    Expect([5, 4], #{limit => 2, direction => backward}),
    Expect([1, 2], #{limit => 2, direction => forward}),
    %% a call's range is the history its processor is given
    {ok, ok} = ?P:call(#{ns => Ns, id => Id, args => step(#{}), range => #{offset => 3, limit => 1}}),
    {Id, call, _, _, #{history := [#{event_id := 4}], last_event_id := 5}} = lists:last(seen(Id)),
    {ok, ok} = ?P:call(#{ns => Ns, id => Id, args => step(#{}), range => #{limit => 2, direction => backward}}),
    {Id, call, _, _, #{history := [#{event_id := 5}, #{event_id := 4}]}} = lists:last(seen(Id));
test(put, Ns) ->
    Id = id(),
    [P1, P2, P3, Aux] = [bin() || _ <- lists:seq(1, 4)],
    Ts = erlang:system_time(second) - 3600,
    Process = #{
        process_id => Id,
        status => <<"running">>,
        aux_state => Aux,
        metadata => #{<<"k">> => 1},
        history => [
            #{event_id => I, timestamp => Ts + I, metadata => #{<<"format_version">> => 1}, payload => P}
         || {I, P} <- [{1, P1}, {2, P2}, {3, P3}]
        ]
    },
    {ok, ok} = ?P:put(#{ns => Ns, id => Id, args => #{process => Process}}),
    T1 = Ts + 1,
    T3 = Ts + 3,
    {ok, #{
        process_id := Id,
        status := <<"running">>,
        aux_state := Aux,
        metadata := #{<<"k">> := 1},
        last_event_id := 3,
        history := [
            #{event_id := 1, timestamp := T1, payload := P1, metadata := #{<<"format_version">> := 1}},
            #{event_id := 2, payload := P2},
            #{event_id := 3, timestamp := T3, payload := P3}
        ]
    }} = ?P:get(#{ns => Ns, id => Id}),
    {error, <<"process already exists">>} = ?P:put(#{ns => Ns, id => Id, args => #{process => Process}}),
    %% the imported process runs like any other
    {ok, ok} = ?P:call(#{ns => Ns, id => Id, args => step(#{})}),
    [{Id, call, _, _, #{aux_state := Aux, history := [_, _, _]}}] = seen(Id),
    %% an imported broken process, then repaired
    Id2 = id(),
    {ok, ok} = ?P:put(#{ns => Ns, id => Id2, args => #{process => #{
        process_id => Id2, status => <<"error">>, detail => <<"imported broken">>, history => []
    }}}),
    {ok, #{status := <<"error">>, detail := <<"imported broken">>}} = ?P:get(#{ns => Ns, id => Id2}),
    {ok, ok} = ?P:repair(#{ns => Ns, id => Id2, args => step(#{})}),
    {ok, #{status := <<"running">>}} = ?P:get(#{ns => Ns, id => Id2});
test(put_with_timers, Ns) ->
    %% a timer one second on: the processor's timeout step appends an event
    Id = id(),
    E = bin(),
    {ok, ok} = ?P:put(#{ns => Ns, id => Id, args => #{
        process => #{process_id => Id, status => <<"running">>,
                     aux_state => term_to_binary({timeouts, [#{events => [E]}]}), history => []},
        action => #{set_timer => erlang:system_time(second) + 1}
    }}),
    {ok, #{history := []}} = ?P:get(#{ns => Ns, id => Id}),
    wait(fun() -> {ok, #{history := [#{event_id := 1, payload := E}]}} = ?P:get(#{ns => Ns, id => Id}) end),
    [{Id, timeout, <<>>, _, _}] = seen(Id),
    %% a removal one second on
    Id2 = id(),
    {ok, ok} = ?P:put(#{ns => Ns, id => Id2, args => #{
        process => #{process_id => Id2, status => <<"running">>, history => []},
        action => #{set_timer => erlang:system_time(second) + 1, remove => true}
    }}),
    {ok, #{status := <<"running">>}} = ?P:get(#{ns => Ns, id => Id2}),
    wait(fun() -> {error, <<"process not found">>} = ?P:get(#{ns => Ns, id => Id2}) end),
    %% a processor's #{remove => true} without a time removes the process at once
    Id4 = id(),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id4}),
    {ok, ok} = ?P:call(#{ns => Ns, id => Id4, args => step(#{remove => true})}),
    wait(fun() -> {error, <<"process not found">>} = ?P:get(#{ns => Ns, id => Id4}) end),
    %% unset_timer schedules nothing
    Id3 = id(),
    {ok, ok} = ?P:put(#{ns => Ns, id => Id3, args => #{
        process => #{process_id => Id3, history => []}, action => unset_timer
    }}),
    {ok, []} = ?P:trace(#{ns => Ns, id => Id3}),
    {ok, #{status := <<"running">>}} = ?P:get(#{ns => Ns, id => Id3});
test(trace, Ns) ->
    Id = id(),
    [E1, E2, Ctx, Resp] = [bin() || _ <- lists:seq(1, 4)],
    InitArgs = step(#{events => [E1], timer => 0, timeouts => [#{events => [E2]}]}),
    {ok, ok} = ?P:init(#{ns => Ns, id => Id, args => InitArgs, context => Ctx}),
    wait(fun() -> {ok, #{last_event_id := 2}} = ?P:get(#{ns => Ns, id => Id}) end),
    Key = <<"key-", Id/binary>>,
    CallArgs = step(#{response => Resp}),
    {ok, Resp} = ?P:call(#{ns => Ns, id => Id, args => CallArgs, idempotency_key => Key}),
    {error, <<"bad">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => <<"bad">>})}),
    {ok, [Init, Timeout, Call, Failed]} = ?P:trace(#{ns => Ns, id => Id}),
    #{
        task_type := <<"init">>, task_status := <<"finished">>, args := InitArgs, context := Ctx,
        response := {ok, ok}, retry_attempts := 0, scheduled := S, running := R, finished := F,
        event_id := 1, event_payload := E1, event_timestamp := _,
        event_metadata := #{<<"format_version">> := 1}
    } = Init,
    true = S =< R andalso R =< F,
    #{task_type := <<"timeout">>, task_status := <<"finished">>, response := {ok, ok},
      event_id := 2, event_payload := E2} = Timeout,
    #{task_type := <<"call">>, task_status := <<"finished">>, args := CallArgs,
      idempotency_key := Key, response := {ok, Resp}} = Call,
    false = maps:is_key(event_id, Call),
    #{task_type := <<"call">>, task_status := <<"error">>, response := {error, <<"bad">>}} = Failed,
    [#{task_id := I1}, #{task_id := I2}, #{task_id := I3}, #{task_id := I4}] = [Init, Timeout, Call, Failed],
    true = I1 < I2 andalso I2 < I3 andalso I3 < I4;
test(idempotency_keys, Ns) ->
    Id = id(),
    [R1, R2, C1, C2, E1, E2] = [bin() || _ <- lists:seq(1, 6)],
    Key = <<"init-", Id/binary>>,
    {ok, R1} = ?P:init(#{ns => Ns, id => Id, args => step(#{response => R1}), idempotency_key => Key}),
    %% the same key answers the first answer, not "process already exists"
    {ok, R1} = ?P:init(#{ns => Ns, id => Id, args => step(#{response => R2}), idempotency_key => Key}),
    CallKey = <<"call-", Id/binary>>,
    {ok, C1} = ?P:call(#{ns => Ns, id => Id, args => step(#{response => C1, events => [E1]}),
                         idempotency_key => CallKey}),
    {ok, C1} = ?P:call(#{ns => Ns, id => Id, args => step(#{response => C2, events => [E2]}),
                         idempotency_key => CallKey}),
    {ok, #{last_event_id := 1, history := [#{payload := E1}]}} = ?P:get(#{ns => Ns, id => Id}),
    %% a failed call's key answers its error again, even though the process is now broken
    FailKey = <<"fail-", Id/binary>>,
    {error, <<"nope">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => <<"nope">>}),
                                   idempotency_key => FailKey}),
    {error, <<"nope">>} = ?P:call(#{ns => Ns, id => Id, args => step(#{error => <<"nope">>}),
                                   idempotency_key => FailKey}),
    %% the processor ran once per key
    [init, call, call] = [T || {_, T, _, _, _} <- seen(Id)];
test(health_check, Ns) ->
    {passing, []} = ?P:health_check([Ns]),
    {passing, []} = ?P:health_check([]),
    {critical, #{progressor_namespace := no_such_namespace, error := <<"namespace not found">>}} =
        ?P:health_check([Ns, no_such_namespace]),
    {critical, #{progressor_namespace := Ns, error := _}} =
        ?P:health_check([Ns], #{server => "http://127.0.0.1:1"});
test(ids_and_config, Ns) ->
    %% ids with '/', '?', spaces and non-ASCII stay one path segment
    Id = <<"order/1?x=y é#"/utf8, (id())/binary>>,
    {ok, ok} = ?P:init(#{ns => Ns, id => Id}),
    {ok, #{process_id := Id}} = ?P:get(#{ns => Ns, id => Id}),
    {ok, [#{task_type := <<"init">>}]} = ?P:trace(#{ns => Ns, id => Id}),
    %% namespaces as progressor's atoms, or binaries
    {ok, #{process_id := Id}} = ?P:get(#{ns => atom_to_binary(Ns), id => Id}),
    %% the request's options win over the application env, which wins over DOCKET_SERVER
    Nowhere = "http://127.0.0.1:1",
    {error, {http, _}} = ?P:get(#{ns => Ns, id => Id, options => #{server => Nowhere}}),
    %% the .app file (src/docket_progressor.app.src) loads and its dependencies start
    {ok, _} = application:ensure_all_started(docket_progressor),
    ok = application:set_env(docket_progressor, server, Nowhere),
    try
        {error, {http, _}} = ?P:get(#{ns => Ns, id => Id}),
        {ok, _} = ?P:get(#{ns => Ns, id => Id, options => #{server => os:getenv("DOCKET_SERVER")}})
    after
        application:unset_env(docket_progressor, server)
    end,
    {ok, _} = ?P:get(#{ns => Ns, id => Id});
test(start_namespaces_config_errors, _Ns) ->
    %% a wrong configuration starts nothing
    Proc = #{processor => #{client => docket_progressor_test_processor, options => #{}}},
    {error, {'a:b', {invalid_docket_namespace, <<"a:b">>}}} =
        ?PP:start_namespaces(#{namespaces => #{'a:b' => Proc}}),
    {error, {_, {same_docket_namespace, <<"x.y">>, _}}} =
        ?PP:start_namespaces(#{namespaces => #{'x/y' => Proc, 'x.y' => Proc}}),
    {error, {n, {processor_not_loaded, no_such_module, _}}} =
        ?PP:start_namespaces([{namespaces, #{n => #{processor => #{client => no_such_module}}}}]),
    {error, {n, {process_step_timeout, -1}}} =
        ?PP:start_namespaces(#{namespaces => #{n => Proc#{process_step_timeout => -1}}}),
    {error, {n, {processor, undefined}}} = ?PP:start_namespaces(#{namespaces => #{n => #{}}}),
    [] = namespace_httpds(),
    %% the mapping alone
    {ok, #{<<"process_step_timeout">> := <<"1500ms">>, <<"task_scan_timeout">> := <<"2m">>,
           <<"retry_policy">> := #{<<"max_attempts">> := 2147483647, <<"max_timeout">> := null}},
     #{storage := x, {retry_policy, extra} := 1}} =
        ?PP:namespace_config(#{process_step_timeout => 1.5, task_scan_timeout => "2m", storage => x,
                               retry_policy => #{max_timeout => infinity, extra => 1}});
test(start_namespaces, _Ns) ->
    %% test/progressor_sys.config, as erl -config gives it: the `progressor` application env
    Echo = 'default/default',
    Scripted = 'test/scripted',
    {ok, Started, Skipped} = ?PP:start_namespaces(),
    [{Echo, <<"default.default">>, EchoUrl}, {Scripted, <<"erl-scripted">>, ScriptedUrl}] = Started,
    %% what docket has no counterpart for, by namespace
    [{Echo, #{storage := #{client := prg_pg_backend},
              notifier := #{client := default_kafka_client,
                            options := #{topic := <<"default_topic">>}}} = S1},
     {Scripted, #{storage := _, last_timer_repair := true} = S2}] = Skipped,
    {2, 2} = {map_size(S1), map_size(S2)},
    %% docket has the namespaces with the options merged over the defaults, in its units
    #{<<"processor">> := #{<<"url">> := EchoUrl},
      <<"retry_policy">> := #{
          <<"initial_timeout">> := <<"3s">>, <<"backoff_coefficient">> := 1.2,
          <<"max_timeout">> := <<"3m">>, <<"max_attempts">> := 2,
          <<"non_retryable_errors">> := [<<"some_reason">>]},
      <<"worker_pool_size">> := 200, <<"process_step_timeout">> := <<"30s">>,
      <<"task_scan_timeout">> := <<"10s">>, <<"call_scan_timeout">> := <<"3s">>} =
        namespace(<<"default.default">>),
    %% the namespace's retry_policy replaced the default one whole
    #{<<"processor">> := #{<<"url">> := ScriptedUrl},
      <<"retry_policy">> := #{
          <<"initial_timeout">> := <<"1s">>, <<"backoff_coefficient">> := 2.0,
          <<"max_timeout">> := <<"4s">>, <<"max_attempts">> := 2147483647,
          <<"non_retryable_errors">> := [
              <<"fatal_one">>, <<"{\"$bin\":\"RXJyb3IgbWVzc2FnZQ==\"}">>, <<"{temporary,unavailable}">>
          ]},
      <<"worker_pool_size">> := 5, <<"process_step_timeout">> := <<"30s">>,
      <<"task_scan_timeout">> := <<"10s">>, <<"call_scan_timeout">> := <<"2s">>} =
        namespace(<<"erl-scripted">>),
    %% the client maps progressor's names (atoms or binaries) to docket's
    {ok, #{Echo := <<"default.default">>, Scripted := <<"erl-scripted">>}} =
        application:get_env(docket_progressor, namespace_names),
    <<"erl-scripted">> = ?P:docket_namespace(<<"test/scripted">>),
    <<"other.ns.x">> = ?P:docket_namespace('other/ns/x'),
    {passing, []} = ?P:health_check([Echo, Scripted]),
    %% a process driven through init, a call and timers, by progressor's names
    Id = id(),
    [E1, E2, E3, E4, Resp] = [bin() || _ <- lists:seq(1, 5)],
    {ok, ok} = ?P:init(#{ns => Scripted, id => Id, args => step(#{events => [E1]})}),
    Key = <<"k-", Id/binary>>,
    {ok, Resp} = ?P:call(#{ns => Scripted, id => Id, idempotency_key => Key, args => step(#{
        events => [E2], response => Resp, timer => 0,
        timeouts => [#{events => [E3], timer => 0}, #{events => [E4]}]
    })}),
    wait(fun() -> {ok, #{last_event_id := 4}} = ?P:get(#{ns => Scripted, id => Id}) end, 60000),
    {ok, #{status := <<"running">>, history := H}} = ?P:get(#{ns => <<"test/scripted">>, id => Id}),
    [E1, E2, E3, E4] = [P || #{payload := P} <- H],
    {ok, [#{task_type := <<"init">>}, #{task_type := <<"call">>, idempotency_key := Key},
          #{task_type := <<"timeout">>}, #{task_type := <<"timeout">>}]} =
        ?P:trace(#{ns => Scripted, id => Id}),
    [init, call, timeout, timeout] = [T || {_, T, _, _, _} <- seen(Id)],
    %% non_retryable_errors: each term stops a failing timer at once; another error is retried
    %% (every 1 s, x2, until the interval reaches max_timeout, 4 s)
    Broken = fun(Reason) ->
        I = id(),
        {ok, ok} = ?P:init(#{ns => Scripted, id => I, args => step(#{timer => 0, timeouts => [#{error => Reason}]})}),
        I
    end,
    Ids = [{Broken(R), R} || R <- [fatal_one, <<"Error message">>, {temporary, unavailable}, retry_me]],
    Attempts = fun(I) ->
        wait(fun() -> {ok, #{status := <<"error">>}} = ?P:get(#{ns => Scripted, id => I}) end, 60000),
        {ok, [_, #{task_type := <<"timeout">>, task_status := <<"error">>, retry_attempts := A}]} =
            ?P:trace(#{ns => Scripted, id => I}),
        A
    end,
    [{_, 0}, {_, 0}, {_, 0}, {retry_me, Retried}] = [{R, Attempts(I)} || {I, R} <- Ids],
    true = Retried >= 1,
    %% progressor's echo processor: init, then 10 timers, 11 events
    EchoId = id(),
    {ok, ok} = ?P:init(#{ns => Echo, id => EchoId}),
    wait(fun() -> {ok, #{last_event_id := 11}} = ?P:get(#{ns => Echo, id => EchoId}) end, 180000),
    timer:sleep(1000),
    {ok, #{status := <<"running">>, last_event_id := 11, history := EchoH}} =
        ?P:get(#{ns => Echo, id => EchoId}),
    Seq = lists:seq(1, 11),
    Seq = [I || #{event_id := I} <- EchoH],
    [#{<<"format_version">> := 1}] = lists:usort([M || #{metadata := M} <- EchoH]),
    EchoPayloads = [P || #{payload := P} <- EchoH],
    Random = [B || P <- EchoPayloads, {bin, B} <- [binary_to_term(P)], byte_size(B) =:= 8],
    11 = length(lists:usort(Random)),
    {ok, EchoTrace} = ?P:trace(#{ns => Echo, id => EchoId}),
    [<<"init">> | Timeouts] = [T || #{task_type := T} <- EchoTrace],
    10 = length([T || <<"timeout">> = T <- Timeouts]),
    [<<"finished">>] = lists:usort([S || #{task_status := S} <- EchoTrace]),
    %% again, from a map: each namespace moves to a new httpd and the old one is stopped
    Config = maps:from_list(application:get_all_env(progressor)),
    {ok, [{Echo, _, EchoUrl2}, {Scripted, _, ScriptedUrl2}], [_, _]} = ?PP:start_namespaces(Config, #{}),
    true = EchoUrl2 =/= EchoUrl andalso ScriptedUrl2 =/= ScriptedUrl,
    #{<<"processor">> := #{<<"url">> := ScriptedUrl2}} = namespace(<<"erl-scripted">>),
    {ok, Resp} = ?P:call(#{ns => Scripted, id => Id, args => step(#{response => Resp})}),
    %% the old httpds serve on for a moment (`grace`, 5 s): other nodes may still use them
    wait(fun() -> {error, _} = connect(EchoUrl), {error, _} = connect(ScriptedUrl) end, 30000),
    2 = length(namespace_httpds()),
    {ok, _} = connect(ScriptedUrl2),
    ok = ?PP:stop_namespaces([Scripted]),
    [{_, Echo, _}] = namespace_httpds(),
    ok = ?PP:stop_namespaces(),
    [] = namespace_httpds(),
    {error, _} = connect(EchoUrl2);
test(tls_and_token, Ns) ->
    case os:getenv("DOCKET_TEST_TLS_URL") of
        false ->
            skip;
        Url ->
            Opts = #{server => Url, token => os:getenv("DOCKET_TEST_TOKEN"),
                     ca_file => os:getenv("DOCKET_TEST_CA")},
            Id = id(),
            Resp = bin(),
            {passing, []} = ?P:health_check([Ns], Opts),
            {ok, Resp} = ?P:init(#{ns => Ns, id => Id, args => step(#{response => Resp}), options => Opts}),
            {ok, #{status := <<"running">>}} = ?P:get(#{ns => Ns, id => Id, options => Opts}),
            {error, {docket, <<"unauthenticated">>, _}} =
                ?P:get(#{ns => Ns, id => Id, options => Opts#{token => <<"not-a-token">>}}),
            %% the server's certificate is signed by the test CA only (ssl's notice of the
            %% refused handshake is silenced: it is the expected outcome)
            logger:set_primary_config(level, warning),
            {error, {http, _}} =
                ?P:get(#{ns => Ns, id => Id, options => maps:remove(ca_file, Opts)}),
            logger:set_primary_config(level, notice)
    end.

%%% Helpers

namespace(Name) ->
    {ok, #{<<"name">> := Name, <<"config">> := Config}} = docket_progressor_http:request(
        get, [<<"v1">>, <<"namespaces">>, Name], [], undefined, docket_progressor_http:config(#{})
    ),
    Config.

%% The httpds start_namespaces started: [{Pid, Namespace, Port}].
namespace_httpds() ->
    [{Pid, Ns, proplists:get_value(port, Info)}
     || {httpd, Pid} <- inets:services(), Info <- [httpd:info(Pid)],
        {docket_progressor_namespace, Ns} <- [lists:keyfind(docket_progressor_namespace, 1, Info)]].

connect(Url) ->
    #{host := Host, port := Port} = uri_string:parse(Url),
    case gen_tcp:connect(binary_to_list(Host), Port, [], 2000) of
        {ok, S} -> gen_tcp:close(S), {ok, Port};
        Error -> Error
    end.

id() ->
    <<"p-", (integer_to_binary(erlang:unique_integer([positive])))/binary>>.

%% Bytes that are not UTF-8 (term_to_binary output starts with 131), each distinct.
bin() ->
    term_to_binary({payload, erlang:unique_integer(), <<255, 0, 254>>}).

step(Step) ->
    term_to_binary(Step).

seen(Id) ->
    ets:lookup(docket_progressor_seen, Id).

%% Retries Fun (a match that crashes until it holds) for up to 15 s (or Ms).
wait(Fun) ->
    wait(Fun, 15000).

wait(Fun, Ms) ->
    wait_until(Fun, erlang:monotonic_time(millisecond) + Ms).

wait_until(Fun, Deadline) ->
    case erlang:monotonic_time(millisecond) < Deadline of
        false ->
            Fun();
        true ->
            try
                Fun()
            catch
                error:_ -> timer:sleep(100), wait_until(Fun, Deadline)
            end
    end.

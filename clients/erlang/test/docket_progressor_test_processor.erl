%% A progressor processor for the tests, served to docket by docket_progressor_processor.
%% What it answers is scripted by the caller, as progressor's own suites script their mocks:
%% args are term_to_binary(Step) (binaries, as progressor users' args are), and a timer runs the
%% first Step of the `timeouts` list kept in the aux state. A Step may hold:
%%   events => [Payload]        binaries appended as events
%%   response => Term           the caller's answer
%%   error => Reason            {error, Reason} instead of a result
%%   aux => Bin, metadata => Map
%%   timer => Seconds           set_timer at now + Seconds; remove => true makes it a removal
%%   remove => true             (without timer) remove the process at once
%%   crash => Reason            raise error(Reason)
%%   timeouts => [Step]         what the following timers do
%%   sleep => Ms                answer that much later
%% Every request is recorded in the ETS table docket_progressor_seen (key: process id), so a
%% test can check what the processor was given.
-module(docket_progressor_test_processor).

-export([process/3]).

process({timeout, Args, Process} = Req, _Opts, Ctx) ->
    record(Req, Ctx),
    {Step, Rest} =
        case maps:get(aux_state, Process, undefined) of
            Aux when is_binary(Aux) ->
                case binary_to_term(Aux) of
                    {timeouts, [S | R]} -> {S, R};
                    _ -> {#{}, []}
                end;
            _ ->
                {#{}, []}
        end,
    <<>> = Args,
    run(maps:merge(#{timeouts => Rest}, Step));
process({_Type, Args, _Process} = Req, _Opts, Ctx) ->
    record(Req, Ctx),
    run(case Args of <<>> -> #{}; _ -> binary_to_term(Args) end).

run(#{sleep := Ms} = Step) ->
    timer:sleep(Ms),
    run(maps:remove(sleep, Step));
run(#{error := Reason}) ->
    {error, Reason};
run(#{crash := Reason}) ->
    error(Reason);
run(Step) ->
    Events = [
        #{event_id => 0, timestamp => 0, metadata => #{<<"format_version">> => 1}, payload => P}
     || P <- maps:get(events, Step, [])
    ],
    Aux =
        case Step of
            #{aux := A} -> #{aux_state => A};
            #{timeouts := T} -> #{aux_state => term_to_binary({timeouts, T})};
            _ -> #{}
        end,
    Action =
        case Step of
            #{timer := Secs} ->
                #{action => #{set_timer => erlang:system_time(second) + Secs,
                              remove => maps:get(remove, Step, false)}};
            #{remove := true} ->
                #{action => #{remove => true}};
            _ ->
                #{}
        end,
    Intent = maps:merge(maps:with([response, metadata], Step), #{events => Events}),
    {ok, maps:merge(maps:merge(Intent, Aux), Action)}.

record({Type, Args, #{process_id := Id} = Process}, Ctx) ->
    ets:insert(docket_progressor_seen, {Id, Type, Args, Ctx, Process}).

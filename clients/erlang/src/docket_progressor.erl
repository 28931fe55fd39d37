%% progressor's API over docket's HTTP API: the same function names, request maps and
%% return shapes, so a progressor user changes the module name and keeps the call sites.
%% README.md has the mapping, the $bin encoding and what differs.
-module(docket_progressor).

-export([init/1, call/1, repair/1, simple_repair/1, get/1, put/1, trace/1]).
-export([health_check/1, health_check/2]).
-export([put_namespace/2, put_namespace/3]).
-export([docket_namespace/1]).
%% Shared with docket_progressor_processor.
-export([process/1, event/2]).

-type namespace_id() :: atom() | binary() | string().
-type id() :: binary().
-type history_range() :: #{
    offset => non_neg_integer(),
    limit => non_neg_integer(),
    direction => forward | backward
}.
-type options() :: #{
    server => string() | binary(),
    token => string() | binary(),
    ca_file => string(),
    timeout => timeout(),
    init_wait => non_neg_integer()
}.
-type request() :: #{
    ns := namespace_id(),
    id := id(),
    args => term(),
    idempotency_key => binary(),
    context => term(),
    range => history_range(),
    options => options(),
    _ => _
}.
-export_type([request/0, options/0, history_range/0]).

-define(INIT_POLL_MS, 200).

%%% progressor's API

-spec init(request()) -> {ok, term()} | {error, term()}.
init(#{ns := Ns, id := Id} = Req) ->
    step(ns_path(Ns, []), Req, [args, context, idempotency_key], #{<<"id">> => to_bin(Id)}).

-spec call(request()) -> {ok, term()} | {error, term()}.
call(#{ns := Ns, id := Id} = Req) ->
    step(ns_path(Ns, [Id, <<"call">>]), Req, [args, context, idempotency_key, range], #{}).

-spec repair(request()) -> {ok, term()} | {error, term()}.
repair(#{ns := Ns, id := Id} = Req) ->
    step(ns_path(Ns, [Id, <<"repair">>]), Req, [args, context, idempotency_key, range], #{}).

%% docket's simple-repair takes no args or context: only the status changes.
-spec simple_repair(request()) -> {ok, ok} | {error, term()}.
simple_repair(#{ns := Ns, id := Id} = Req) ->
    case http(post, ns_path(Ns, [Id, <<"simple-repair">>]), [], undefined, Req) of
        {ok, _} -> {ok, ok};
        Error -> Error
    end.

%% Like progressor, a process still in `init` (its init step running) is read again until it
%% leaves it, here for at most `init_wait` ms (default 60 s, progressor's step timeout).
-spec get(request()) -> {ok, map()} | {error, term()}.
get(#{ns := Ns, id := Id} = Req) ->
    Range = maps:get(range, Req, #{}),
    Wait = maps:get(init_wait, maps:get(options, Req, #{}), 60000),
    get(ns_path(Ns, [Id]), range_query(Range), Range, Req, now_ms() + Wait).

get(Path, Query, Range, Req, Deadline) ->
    case http(get, Path, Query, undefined, Req) of
        {ok, #{<<"process">> := #{<<"status">> := <<"init">>}}} = Init ->
            case now_ms() < Deadline of
                true ->
                    timer:sleep(?INIT_POLL_MS),
                    get(Path, Query, Range, Req, Deadline);
                false ->
                    process_view(Init, Range)
            end;
        Answer ->
            process_view(Answer, Range)
    end.

process_view({ok, #{<<"process">> := P, <<"history">> := H, <<"last_event_id">> := Last}}, Range) ->
    Process = process(P),
    Id = maps:get(process_id, Process),
    {ok, Process#{history => [event(E, Id) || E <- H], last_event_id => Last, range => Range}};
process_view({ok, Other}, _Range) ->
    {error, {unexpected, Other}};
process_view(Error, _Range) ->
    Error.

%% args: #{process := #{status, detail, aux_state, metadata, history}, action => Action}.
%% docket numbers imported events 1, 2, 3... in the order of their event_id.
-spec put(request()) -> {ok, ok} | {error, term()}.
put(#{ns := Ns, id := Id, args := #{process := P} = Args} = Req) ->
    guarded(fun() ->
        History = lists:sort(
            fun(A, B) -> maps:get(event_id, A, 0) =< maps:get(event_id, B, 0) end,
            maps:get(history, P, [])
        ),
        Body = opt_fields(
            [
                {<<"detail">>, maps:get(detail, P, undefined), fun detail_out/1},
                {<<"aux_state">>, maps:get(aux_state, P, undefined), fun to_json/1},
                {<<"metadata">>, maps:get(metadata, P, undefined), fun docket_progressor_json:metadata/1},
                {<<"timer">>, timer(maps:get(action, Args, undefined)), fun id/1}
            ],
            #{
                <<"status">> => to_bin(maps:get(status, P, <<"running">>)),
                <<"history">> => [imported_event(E) || E <- History]
            }
        ),
        case http(put, ns_path(Ns, [Id]), [], Body, Req) of
            {ok, _} -> {ok, ok};
            Error -> Error
        end
    end).

%% progressor's flat trace: one map per task and event (a task without events: one map).
-spec trace(request()) -> {ok, [map()]} | {error, term()}.
trace(#{ns := Ns, id := Id} = Req) ->
    case http(get, ns_path(Ns, [Id, <<"trace">>]), [], undefined, Req) of
        {ok, #{<<"tasks">> := Tasks}} ->
            Prefix = <<"idem:", (docket_namespace(Ns))/binary, ":", (to_bin(Id))/binary, ":">>,
            {ok, lists:append([trace_rows(T, Prefix) || T <- Tasks])};
        {ok, Other} ->
            {error, {unexpected, Other}};
        Error ->
            Error
    end.

%% {passing, []} when the server answers /healthz and knows every namespace, else
%% {critical, #{progressor_namespace => Ns, error => Detail}} as progressor gives it.
-spec health_check([namespace_id()]) -> {passing | critical, term()}.
health_check(Namespaces) ->
    health_check(Namespaces, #{}).

-spec health_check([namespace_id()], options()) -> {passing | critical, term()}.
health_check(Namespaces, Options) ->
    Req = #{options => Options},
    case http(get, [<<"healthz">>], [], undefined, Req) of
        {ok, _} ->
            check_namespaces(Namespaces, Req);
        {error, Reason} ->
            Base = #{error => format(Reason)},
            {critical, case Namespaces of
                [Ns | _] -> Base#{progressor_namespace => Ns};
                [] -> Base
            end}
    end.

%%% Setup (not progressor's: its namespaces are application env)

%% Config as in PUT /v1/namespaces/{ns}, e.g. #{processor => #{url => <<"http://...">>}}.
%% Ns may be progressor's name ('default/default'): it is put under docket_namespace(Ns).
-spec put_namespace(namespace_id(), map()) -> {ok, map()} | {error, term()}.
put_namespace(Ns, Config) ->
    put_namespace(Ns, Config, #{}).

-spec put_namespace(namespace_id(), map(), options()) -> {ok, map()} | {error, term()}.
put_namespace(Ns, Config, Options) ->
    guarded(fun() ->
        http(put, [<<"v1">>, <<"namespaces">>, docket_namespace(Ns)], [],
             docket_progressor_json:metadata(Config),
             #{options => Options})
    end).

%% The docket name of a progressor namespace, used by every function here that takes `ns`.
%% docket's names are 1-64 characters of A-Z a-z 0-9 _ . - and progressor's often hold '/'
%% ('default/default'). The name is the `namespace_names` entry of the docket_progressor
%% application env for Ns (an atom or binary key; start_namespaces records its names there),
%% else Ns with each '/' replaced by '.' ('default/default' -> <<"default.default">>).
-spec docket_namespace(namespace_id()) -> binary().
docket_namespace(Ns) ->
    Bin = to_bin(Ns),
    Names = application:get_env(docket_progressor, namespace_names, #{}),
    case maps:find(Ns, Names) of
        {ok, Name} ->
            to_bin(Name);
        error ->
            Found = [N || {K, N} <- maps:to_list(Names), name_key(K) =:= Bin],
            case Found of
                [Name | _] -> to_bin(Name);
                [] -> binary:replace(Bin, <<"/">>, <<".">>, [global])
            end
    end.

name_key(K) when is_atom(K); is_binary(K) -> to_bin(K);
name_key(K) when is_list(K) -> try to_bin(K) catch _:_ -> undefined end;
name_key(_) -> undefined.

%%% docket's JSON to progressor's maps

%% A process as progressor's get/1 (and its processors) see it; absent fields are left out as
%% progressor leaves out NULL columns.
-spec process(map()) -> map().
process(#{<<"id">> := Id, <<"status">> := Status} = P) ->
    J = fun(K) -> maps:get(K, P, null) end,
    opt_fields(
        [
            {previous_status, J(<<"previous_status">>), fun id/1},
            {detail, J(<<"detail">>), fun detail_in/1},
            {aux_state, J(<<"aux_state">>), fun docket_progressor_json:from_json/1},
            {metadata, J(<<"metadata">>), fun docket_progressor_json:from_json/1},
            {corrupted_by, J(<<"corrupted_by">>), fun id/1},
            {status_changed_at, J(<<"status_changed_at">>), fun docket_progressor_json:to_seconds/1}
        ],
        #{process_id => Id, status => Status}
    ).

-spec event(map(), id()) -> map().
event(#{<<"event_id">> := EventId} = E, ProcessId) ->
    opt_fields(
        [{task_id, maps:get(<<"task_id">>, E, null), fun id/1}],
        #{
            process_id => ProcessId,
            event_id => EventId,
            timestamp => docket_progressor_json:to_seconds(maps:get(<<"timestamp">>, E, null)),
            metadata => docket_progressor_json:from_json(maps:get(<<"metadata">>, E, #{})),
            payload => docket_progressor_json:from_json(maps:get(<<"payload">>, E, null))
        }
    ).

%%% Internal

step(Path, Req, Keys, Extra) ->
    guarded(fun() ->
        case http(post, Path, [], maps:merge(body(Req, Keys), Extra), Req) of
            {ok, #{<<"response">> := R}} -> {ok, response(R)};
            {ok, Other} -> {error, {unexpected, Other}};
            Error -> Error
        end
    end).

%% progressor answers {ok, ok} when the processor gave no response.
response(null) -> ok;
response(R) -> docket_progressor_json:from_json(R).

body(Req, Keys) ->
    lists:foldl(
        fun(K, Acc) ->
            case maps:find(K, Req) of
                {ok, V} -> Acc#{atom_to_binary(K, utf8) => field(K, V)};
                error -> Acc
            end
        end,
        #{},
        Keys
    ).

field(args, V) -> to_json(V);
field(context, V) -> to_json(V);
field(idempotency_key, V) -> to_bin(V);
field(range, R) -> maps:fold(fun(K, V, Acc) -> Acc#{atom_to_binary(K, utf8) => V} end, #{}, R).

range_query(Range) ->
    [{atom_to_list(K), V} || K <- [offset, limit, direction], {ok, V} <- [maps:find(K, Range)]].

imported_event(E) ->
    opt_fields(
        [
            {<<"timestamp">>, maps:get(timestamp, E, undefined), fun docket_progressor_json:to_rfc3339/1},
            {<<"metadata">>, maps:get(metadata, E, undefined), fun docket_progressor_json:metadata/1}
        ],
        #{<<"payload">> => to_json(maps:get(payload, E, null))}
    ).

%% unset_timer and no action alike: progressor's put schedules nothing for either.
timer(#{set_timer := At} = A) ->
    #{<<"set_timer">> => docket_progressor_json:to_rfc3339(At), <<"remove">> => maps:get(remove, A, false)};
timer(_) ->
    undefined.

trace_rows(#{<<"id">> := TaskId, <<"kind">> := Kind, <<"state">> := State} = T, IdemPrefix) ->
    J = fun(K) -> maps:get(K, T, null) end,
    Payload = case J(<<"payload">>) of #{} = M -> M; _ -> #{} end,
    P = fun(K) -> maps:get(K, Payload, null) end,
    Secs = fun docket_progressor_json:to_seconds/1,
    Task = opt_fields(
        [
            {scheduled, J(<<"run_at">>), Secs},
            {running, J(<<"attempted_at">>), Secs},
            {finished, J(<<"finished_at">>), Secs},
            {args, P(<<"args">>), fun docket_progressor_json:from_json/1},
            {context, P(<<"context">>), fun docket_progressor_json:from_json/1},
            {task_metadata, P(<<"range">>), fun(R) -> #{<<"range">> => R} end},
            {idempotency_key, idempotency_key(J(<<"unique_key">>), IdemPrefix), fun id/1},
            {response, task_response(State, J(<<"result">>), J(<<"errors">>)), fun id/1}
        ],
        #{
            task_id => TaskId,
            task_type => Kind,
            task_status => task_status(State),
            retry_attempts => max(0, maps:get(<<"attempt">>, T, 0) - 1)
        }
    ),
    case maps:get(<<"events">>, T, []) of
        [] ->
            [Task];
        Events ->
            [
                Task#{
                    event_id => maps:get(event_id, Ev),
                    event_timestamp => maps:get(timestamp, Ev),
                    event_metadata => maps:get(metadata, Ev),
                    event_payload => maps:get(payload, Ev)
                }
             || E <- Events, Ev <- [event(E, null)]
            ]
    end.

%% The table in docs/src/concepts/processes.md, read backwards.
task_status(<<"completed">>) -> <<"finished">>;
task_status(<<"discarded">>) -> <<"error">>;
task_status(<<"scheduled">>) -> <<"waiting">>;
task_status(<<"available">>) -> <<"waiting">>;
task_status(<<"retryable">>) -> <<"waiting">>;
task_status(Other) -> Other.

task_response(<<"completed">>, Result, _) ->
    {ok, response(Result)};
task_response(<<"discarded">>, #{<<"error">> := E}, _) ->
    {error, docket_progressor_json:from_json(E)};
task_response(<<"discarded">>, _, [_ | _] = Errors) ->
    {error, maps:get(<<"message">>, lists:last(Errors), null)};
task_response(_, _, _) ->
    null.

%% docket stores `idem:<ns>:<id>:<key>`; a key too long for that is stored hashed and lost.
idempotency_key(Key, Prefix) when is_binary(Key) ->
    case string:prefix(Key, Prefix) of
        nomatch -> null;
        Rest -> Rest
    end;
idempotency_key(_, _) ->
    null.

%% docket's detail is text: the processor's error when it is a string, else its JSON. A
%% binary error came as {"$bin": ...}; progressor's detail for a binary reason is the binary.
detail_in(D) ->
    try docket_progressor_json:decode(D) of
        #{<<"$bin">> := _} = M when map_size(M) =:= 1 -> docket_progressor_json:from_json(M);
        _ -> D
    catch
        _:_ -> D
    end.

detail_out(D) when is_binary(D) ->
    case unicode:characters_to_binary(D) of
        D -> D;
        _ -> docket_progressor_json:encode(to_json(D))
    end;
detail_out(D) ->
    format(D).

check_namespaces([], _Req) ->
    {passing, []};
check_namespaces([Ns | Rest], Req) ->
    case http(get, [<<"v1">>, <<"namespaces">>, docket_namespace(Ns)], [], undefined, Req) of
        {ok, _} -> check_namespaces(Rest, Req);
        {error, Reason} -> {critical, #{progressor_namespace => Ns, error => format(Reason)}}
    end.

guarded(Fun) ->
    try
        Fun()
    catch
        throw:{not_encodable, T} -> {error, {not_encodable, T}};
        %% jiffy's: a string (an id, a key, metadata) that is not UTF-8
        error:{invalid_string, T} -> {error, {not_encodable, T}}
    end.

http(Method, Path, Query, Body, Req) ->
    docket_progressor_http:request(Method, Path, Query, Body, docket_progressor_http:config(Req)).

ns_path(Ns, Rest) ->
    [<<"v1">>, <<"namespaces">>, docket_namespace(Ns), <<"processes">> | Rest].

opt_fields(Fields, Acc0) ->
    lists:foldl(
        fun
            ({_, null, _}, Acc) -> Acc;
            ({_, undefined, _}, Acc) -> Acc;
            ({K, V, F}, Acc) -> Acc#{K => F(V)}
        end,
        Acc0,
        Fields
    ).

id(X) -> X.

to_json(T) -> docket_progressor_json:to_json(T).

format(B) when is_binary(B) -> B;
format(T) -> unicode:characters_to_binary(io_lib:format("~64000p", [T])).

to_bin(B) when is_binary(B) -> B;
to_bin(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_bin(I) when is_integer(I) -> integer_to_binary(I);
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L).

now_ms() -> erlang:system_time(millisecond).

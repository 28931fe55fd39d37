%% Serves a progressor processor module (Module:process({TaskType, Args, Process}, Options,
%% Context) -> {ok, Intent} | {error, Reason}) as a docket processor: docket POSTs its
%% processor request here and gets the intent back as a processor result. Runs on OTP's
%% inets httpd; give the namespace's processor the URL http://IP:PORT/. start_namespaces does
%% that for each namespace of progressor's own configuration (its `progressor` app env).
-module(docket_progressor_processor).

-export([start/1, stop/1, port/1]).
-export([start_namespaces/0, start_namespaces/1, start_namespaces/2]).
-export([stop_namespaces/0, stop_namespaces/1, namespace_config/1]).
-export([handle/2]).
%% httpd callback
-export([do/1]).

-include_lib("inets/include/httpd.hrl").

-type start_opts() :: #{
    handler := {module(), term()},
    port => inet:port_number(),
    ip => inet:ip_address(),
    %% the progressor namespace served (start_namespaces and stop_namespaces find it by this)
    namespace => term()
}.

-type namespaces_opts() :: #{
    ip => inet:ip_address(),
    url_host => string() | binary(),
    ports => #{term() => inet:port_number()},
    grace => non_neg_integer(),
    options => docket_progressor:options()
}.

%% progressor's retry policy without max_attempts retries without bound (until max_timeout):
%% docket's largest max_attempts.
-define(UNBOUNDED_ATTEMPTS, 2147483647).

%% How long a namespace's previous httpd serves on after start_namespaces moved it.
-define(RETIRE_GRACE_MS, 5000).

%% Port 0 (the default) takes a free port; port/1 says which.
-spec start(start_opts()) -> {ok, pid()} | {error, term()}.
start(#{handler := {Module, _} = Handler} = Opts) when is_atom(Module) ->
    {ok, _} = application:ensure_all_started(inets),
    {ok, Cwd} = file:get_cwd(),
    Tag = case maps:find(namespace, Opts) of
        {ok, Ns} -> [{docket_progressor_namespace, Ns}];
        error -> []
    end,
    inets:start(httpd, [
        {port, maps:get(port, Opts, 0)},
        {bind_address, maps:get(ip, Opts, {127, 0, 0, 1})},
        {server_name, "docket_progressor_processor"},
        %% httpd insists on both; nothing is served from them (this module answers everything).
        {server_root, Cwd},
        {document_root, Cwd},
        {modules, [?MODULE]},
        {docket_progressor_handler, Handler}
        | Tag
    ]).

-spec stop(pid()) -> ok | {error, term()}.
stop(Pid) ->
    inets:stop(httpd, Pid).

-spec port(pid()) -> inet:port_number().
port(Pid) ->
    proplists:get_value(port, httpd:info(Pid)).

%%% Namespaces from progressor's configuration

%% The `progressor` application env, as progressor's sys.config gives it (README.md, "Namespaces
%% from progressor's sys.config"). The `progressor` application need not exist: when no
%% progressor.app can be loaded, an empty one is loaded so that its sys.config entry is readable.
-spec start_namespaces() -> {ok, [{term(), binary(), binary()}], [{term(), map()}]} | {error, term()}.
start_namespaces() ->
    start_namespaces(progressor_env()).

-spec start_namespaces(list() | map()) ->
    {ok, [{term(), binary(), binary()}], [{term(), map()}]} | {error, term()}.
start_namespaces(Config) ->
    start_namespaces(Config, #{}).

%% Config: [{defaults, Map}, {namespaces, #{NS => Opts}}] (the `progressor` env), the same as a
%% map, or a sys.config-like [{progressor, [...]}]. For each namespace (in the order of their
%% names): the options merged over `defaults` as progressor merges them (maps:merge/2, so a
%% namespace's retry_policy replaces the default one whole), an httpd serving its
%% `processor => #{client, options}` (start/1), and PUT /v1/namespaces/{name} with that httpd's
%% URL and the options in docket's terms (namespace_config/1). The name is the namespace's
%% `docket_namespace` option, else docket_progressor:docket_namespace(NS); it is recorded in the
%% docket_progressor env `namespace_names`, so docket_progressor's functions called with NS use
%% it. A namespace whose httpd this function started before is moved to a new httpd; the old
%% one is stopped `grace` ms (5000) after docket has the new URL, at once if its port is the one
%% asked for in `ports`.
%%
%% {ok, [{NS, DocketName, Url}], [{NS, #{Option => Value}}]}: the second list names the options
%% docket has no counterpart for (storage, notifier, ...), by namespace, for namespaces with any.
%% {error, {NS, Reason}}: nothing is started when the configuration is wrong; an error from the
%% server or httpd leaves the namespaces before NS started.
-spec start_namespaces(list() | map(), namespaces_opts()) ->
    {ok, [{term(), binary(), binary()}], [{term(), map()}]} | {error, term()}.
start_namespaces(Config, Opts) ->
    try
        {Defaults, Namespaces} = read_config(Config),
        Plans = [plan(Ns, maps:merge(Defaults, NsOpts)) || {Ns, NsOpts} <- Namespaces],
        ok = check_names(Plans),
        start_planned(Plans, Opts, [], [])
    catch
        throw:{config, Reason} -> {error, Reason}
    end.

%% Stops the httpds start_namespaces started (all, or those of the given namespaces). The
%% namespaces stay in docket: their steps fail until a processor answers at their URL again.
-spec stop_namespaces() -> ok.
stop_namespaces() ->
    lists:foreach(fun({Pid, _, _}) -> stop(Pid) end, namespace_httpds()).

-spec stop_namespaces([term()]) -> ok.
stop_namespaces(Namespaces) ->
    lists:foreach(
        fun({Pid, Ns, _}) ->
            case lists:member(Ns, Namespaces) of
                true -> stop(Pid);
                false -> ok
            end
        end,
        namespace_httpds()
    ).

%% A progressor namespace's options (merged over the defaults) in docket's terms, without the
%% processor: #{retry_policy, worker_pool_size, process_step_timeout, task_scan_timeout,
%% call_scan_timeout} as PUT /v1/namespaces/{ns} takes them (durations: progressor's seconds as
%% "<N>s"), and the options docket has no counterpart for. `processor` and `docket_namespace`
%% are neither.
-spec namespace_config(map()) -> {ok, map(), map()} | {error, term()}.
namespace_config(NsOpts) when is_map(NsOpts) ->
    try
        {Config, Skipped} = docket_config(NsOpts),
        {ok, Config, Skipped}
    catch
        throw:{config, Reason} -> {error, Reason}
    end.

progressor_env() ->
    case lists:keymember(progressor, 1, application:loaded_applications()) of
        true ->
            ok;
        false ->
            case application:load(progressor) of
                ok -> ok;
                {error, {already_loaded, _}} -> ok;
                {error, _} ->
                    %% No progressor.app: an empty application, whose env sys.config fills.
                    _ = application:load({application, progressor, [
                        {description, "progressor's configuration, read by docket_progressor_processor"},
                        {vsn, "0"},
                        {modules, []},
                        {registered, []},
                        {applications, [kernel, stdlib]}
                    ]}),
                    ok
            end
    end,
    application:get_all_env(progressor).

read_config(#{} = Config) ->
    read_config(maps:to_list(Config));
read_config(Config) when is_list(Config) ->
    case lists:keyfind(progressor, 1, Config) of
        {progressor, Inner} when is_list(Inner); is_map(Inner) ->
            read_config(Inner);
        _ ->
            Defaults =
                case proplists:get_value(defaults, Config, #{}) of
                    #{} = D -> D;
                    D -> throw({config, {defaults, {not_a_map, D}}})
                end,
            Namespaces =
                case proplists:get_value(namespaces, Config, #{}) of
                    #{} = N -> lists:sort(maps:to_list(N));
                    N -> throw({config, {namespaces, {not_a_map, N}}})
                end,
            [throw({config, {Ns, {not_a_map, O}}}) || {Ns, O} <- Namespaces, not is_map(O)],
            {Defaults, Namespaces}
    end;
read_config(Config) ->
    throw({config, {not_a_config, Config}}).

%% {Ns, DocketName, Handler, DocketConfig, Skipped}
plan(Ns, NsOpts) ->
    Handler =
        case maps:get(processor, NsOpts, undefined) of
            #{client := Module} = P when is_atom(Module) ->
                case code:ensure_loaded(Module) of
                    {module, Module} -> ok;
                    {error, Why} -> throw({config, {Ns, {processor_not_loaded, Module, Why}}})
                end,
                erlang:function_exported(Module, process, 3) orelse
                    throw({config, {Ns, {processor_not_loaded, Module, no_process_3}}}),
                {Module, maps:get(options, P, #{})};
            Other ->
                throw({config, {Ns, {processor, Other}}})
        end,
    Name =
        case maps:find(docket_namespace, NsOpts) of
            {ok, N} ->
                case name_text(N) of
                    undefined -> throw({config, {Ns, {docket_namespace, N}}});
                    Text -> Text
                end;
            error -> docket_progressor:docket_namespace(Ns)
        end,
    {Config, Skipped} =
        try
            docket_config(NsOpts)
        catch
            throw:{config, Reason} -> throw({config, {Ns, Reason}})
        end,
    {Ns, Name, Handler, Config, Skipped}.

%% docket's names: 1-64 characters of A-Z a-z 0-9 _ . -, one progressor namespace each.
check_names(Plans) ->
    lists:foreach(
        fun({Ns, Name, _, _, _}) ->
            Valid = byte_size(Name) >= 1 andalso byte_size(Name) =< 64 andalso
                lists:all(fun plain_char/1, binary_to_list(Name)),
            Valid orelse throw({config, {Ns, {invalid_docket_namespace, Name}}}),
            case [N || {N, Name2, _, _, _} <- Plans, Name2 =:= Name, N =/= Ns] of
                [] -> ok;
                [Other | _] -> throw({config, {Ns, {same_docket_namespace, Name, Other}}})
            end
        end,
        Plans
    ).

plain_char(C) ->
    (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z) orelse (C >= $0 andalso C =< $9)
        orelse C =:= $_ orelse C =:= $. orelse C =:= $-.

start_planned([], _Opts, Started, Skipped) ->
    {ok, lists:reverse(Started), lists:reverse(Skipped)};
start_planned([{Ns, Name, Handler, Config, Skip} | Rest], Opts, Started, Skipped) ->
    Ip = maps:get(ip, Opts, {127, 0, 0, 1}),
    Port = maps:get(Ns, maps:get(ports, Opts, #{}), 0),
    Old = [H || {_, N, _} = H <- namespace_httpds(), N =:= Ns],
    %% A fixed port still held by the namespace's old httpd: that one goes first.
    [stop(Pid) || {Pid, _, OldPort} <- Old, Port =/= 0, OldPort =:= Port],
    case start(#{handler => Handler, port => Port, ip => Ip, namespace => Ns}) of
        {ok, Pid} ->
            Url = url(maps:get(url_host, Opts, default), Ip, port(Pid)),
            Req = #{options => maps:get(options, Opts, #{})},
            Body = Config#{<<"processor">> => #{<<"url">> => Url}},
            case docket_progressor_http:request(put, [<<"v1">>, <<"namespaces">>, Name], [], Body,
                                                docket_progressor_http:config(Req)) of
                {ok, _} ->
                    ok = record_name(Ns, Name),
                    %% Other nodes may use the old URL for a moment longer (docket re-reads a
                    %% namespace within 1 s), and steps may still be running on it.
                    Grace = maps:get(grace, Opts, ?RETIRE_GRACE_MS),
                    [{ok, _} = timer:apply_after(Grace, ?MODULE, stop, [P]) || {P, _, _} <- Old, P =/= Pid],
                    Skipped1 = case map_size(Skip) of 0 -> Skipped; _ -> [{Ns, Skip} | Skipped] end,
                    start_planned(Rest, Opts, [{Ns, Name, Url} | Started], Skipped1);
                {error, Reason} ->
                    _ = stop(Pid),
                    {error, {Ns, Reason}}
            end;
        {error, Reason} ->
            {error, {Ns, {httpd, Reason}}}
    end.

record_name(Ns, Name) ->
    _ = application:load(docket_progressor),
    Names = application:get_env(docket_progressor, namespace_names, #{}),
    %% one entry per name text: 'a/b' replaces an earlier <<"a/b">>
    Key = name_text(Ns),
    Kept = maps:filter(fun(K, _) -> name_text(K) =/= Key end, Names),
    application:set_env(docket_progressor, namespace_names, Kept#{Ns => Name}).

name_text(A) when is_atom(A) -> atom_to_binary(A, utf8);
name_text(B) when is_binary(B) -> B;
name_text(L) when is_list(L) ->
    case catch unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> undefined
    end;
name_text(_) -> undefined.

%% [{Pid, Namespace, Port}] of the httpds start_namespaces started.
namespace_httpds() ->
    Services = case inets:services() of L when is_list(L) -> L; _ -> [] end,
    [{Pid, Ns, proplists:get_value(port, Info)}
     || {httpd, Pid} <- Services,
        Info <- [try httpd:info(Pid) catch _:_ -> [] end],
        is_list(Info),
        {docket_progressor_namespace, Ns} <- [lists:keyfind(docket_progressor_namespace, 1, Info)]].

url(default, Ip, Port) when is_tuple(Ip) ->
    AnyAddress = lists:all(fun(X) -> X =:= 0 end, tuple_to_list(Ip)),
    Host = case AnyAddress of
        true -> net_adm:localhost();
        false when tuple_size(Ip) =:= 8 -> "[" ++ inet:ntoa(Ip) ++ "]";
        false -> inet:ntoa(Ip)
    end,
    url(Host, Ip, Port);
url(default, any, Port) ->
    url(net_adm:localhost(), any, Port);
url(default, Ip, Port) ->
    url(Ip, Ip, Port);
url(Host, _Ip, Port) ->
    iolist_to_binary(["http://", Host, ":", integer_to_list(Port), "/"]).

%% progressor's option names are docket's; its durations are seconds.
docket_config(NsOpts) ->
    maps:fold(
        fun
            (K, _, Acc) when K =:= processor; K =:= docket_namespace ->
                Acc;
            (retry_policy = K, V, {C, S}) ->
                {RP, RS} = retry_policy(V),
                {C#{atom_to_binary(K) => RP}, maps:merge(S, RS)};
            (worker_pool_size = K, V, {C, S}) when is_integer(V), V >= 1 ->
                {C#{atom_to_binary(K) => V}, S};
            (K, V, {C, S}) when K =:= process_step_timeout; K =:= task_scan_timeout;
                                K =:= call_scan_timeout ->
                {C#{atom_to_binary(K) => duration(K, V)}, S};
            (worker_pool_size = K, V, _) ->
                throw({config, {K, V}});
            (K, V, {C, S}) ->
                {C, S#{K => V}}
        end,
        {#{}, #{}},
        NsOpts
    ).

retry_policy(RP) when is_map(RP) ->
    {Config, Skipped} = maps:fold(
        fun
            (K, V, {C, S}) when K =:= initial_timeout ->
                {C#{atom_to_binary(K) => duration({retry_policy, K}, V)}, S};
            (max_timeout = K, infinity, {C, S}) ->
                {C#{atom_to_binary(K) => null}, S};
            (max_timeout = K, V, {C, S}) ->
                {C#{atom_to_binary(K) => duration({retry_policy, K}, V)}, S};
            (backoff_coefficient = K, V, {C, S}) when is_number(V), V >= 1 ->
                {C#{atom_to_binary(K) => float(V)}, S};
            (max_attempts = K, infinity, {C, S}) ->
                {C#{atom_to_binary(K) => ?UNBOUNDED_ATTEMPTS}, S};
            (max_attempts = K, V, {C, S}) when is_integer(V), V >= 1 ->
                {C#{atom_to_binary(K) => V}, S};
            (non_retryable_errors = K, V, {C, S}) when is_list(V) ->
                {C#{atom_to_binary(K) => [error_match_text(E) || E <- V]}, S};
            (K, V, {_, _}) when K =:= backoff_coefficient; K =:= max_attempts;
                                K =:= non_retryable_errors ->
                throw({config, {{retry_policy, K}, V}});
            (K, V, {C, S}) ->
                {C, S#{{retry_policy, K} => V}}
        end,
        {#{}, #{}},
        RP
    ),
    case maps:is_key(<<"max_attempts">>, Config) of
        true -> {Config, Skipped};
        false -> {Config#{<<"max_attempts">> => ?UNBOUNDED_ATTEMPTS}, Skipped}
    end;
retry_policy(Other) ->
    throw({config, {retry_policy, Other}}).

%% Seconds (progressor's unit), or docket's text ("250ms") as it is.
duration(_, S) when is_integer(S), S >= 0 ->
    <<(integer_to_binary(S))/binary, "s">>;
duration(_, S) when is_float(S), S >= 0 ->
    <<(integer_to_binary(round(S * 1000)))/binary, "ms">>;
duration(_, B) when is_binary(B) ->
    B;
duration(K, L) when is_list(L) ->
    case unicode:characters_to_binary(L) of
        B when is_binary(B) -> B;
        _ -> throw({config, {K, L}})
    end;
duration(K, V) ->
    throw({config, {K, V}}).

%% progressor compares a timer's error reason with each non-retryable term (=:=); docket looks
%% for each text in the error's text, which is the reason as this module sends it (reply/1):
%% an atom its name, a binary {"$bin":"<base64>"}, a tuple its printed form, the rest JSON.
error_match_text(A) when is_atom(A) ->
    atom_to_binary(A, utf8);
error_match_text(T) ->
    try
        docket_progressor_json:encode(docket_progressor_json:to_json(T))
    catch
        throw:{not_encodable, _} -> error_text(T)
    end.

do(#mod{method = "POST", entity_body = Body, config_db = Db}) ->
    Reply = handle(iolist_to_binary(Body), httpd_util:lookup(Db, docket_progressor_handler)),
    respond(200, Reply);
do(#mod{}) ->
    respond(405, <<"{\"error\":\"POST a processor request\"}">>).

respond(Code, Body) ->
    Headers = [
        {code, Code},
        {content_type, "application/json"},
        {content_length, integer_to_list(byte_size(Body))}
    ],
    {proceed, [{response, {response, Headers, [Body]}}]}.

%% docket's processor request (JSON) in, processor result or {"error": ...} (JSON) out.
-spec handle(binary(), {module(), term()}) -> binary().
handle(RequestJson, {Module, Options}) ->
    Req = docket_progressor_json:decode(RequestJson),
    #{<<"task_type">> := Type, <<"process">> := P} = Req,
    Process0 = docket_progressor:process(P),
    Id = maps:get(process_id, Process0),
    Process = Process0#{
        history => [docket_progressor:event(E, Id) || E <- maps:get(<<"history">>, P, [])],
        last_event_id => maps:get(<<"last_event_id">>, P, 0)
    },
    Request = {task_type(Type), opaque(maps:get(<<"args">>, Req, null)), Process},
    Result =
        try Module:process(Request, Options, opaque(maps:get(<<"context">>, Req, null))) of
            {ok, _} = Ok -> Ok;
            {error, _} = Error -> Error;
            _ -> {error, <<"unsupported_result">>}
        catch
            Class:Term -> {error, {exception, Class, Term}}
        end,
    docket_progressor_json:encode(reply(Result)).

task_type(<<"init">>) -> init;
task_type(<<"call">>) -> call;
task_type(<<"repair">>) -> repair;
task_type(<<"timeout">>) -> timeout.

%% progressor gives processors <<>> for absent args and context (timers have neither).
opaque(null) -> <<>>;
opaque(V) -> docket_progressor_json:from_json(V).

reply({ok, Intent}) when is_map(Intent) ->
    try
        intent(Intent)
    catch
        throw:{not_encodable, T} -> #{<<"error">> => error_text({not_encodable, T})}
    end;
reply({error, Reason}) ->
    try
        #{<<"error">> => docket_progressor_json:to_json(Reason)}
    catch
        %% A tuple (an exception, say) has no JSON form: its printed form, which is also the
        %% detail progressor would store for it.
        throw:{not_encodable, _} -> #{<<"error">> => error_text(Reason)}
    end;
reply(_) ->
    #{<<"error">> => <<"unsupported_result">>}.

%% Events' event_id and timestamp are not sent: docket numbers and stamps events itself.
intent(Intent) ->
    Json = fun docket_progressor_json:to_json/1,
    Fields = [
        {<<"aux_state">>, aux_state, Json},
        {<<"metadata">>, metadata, fun docket_progressor_json:metadata/1},
        {<<"response">>, response, Json},
        {<<"action">>, action, fun action/1}
    ],
    lists:foldl(
        fun({JK, K, F}, Acc) ->
            case maps:find(K, Intent) of
                {ok, V} -> Acc#{JK => F(V)};
                error -> Acc
            end
        end,
        #{<<"events">> => [new_event(E) || E <- maps:get(events, Intent, [])]},
        Fields
    ).

new_event(E) ->
    #{
        <<"payload">> => docket_progressor_json:to_json(maps:get(payload, E, null)),
        <<"metadata">> => docket_progressor_json:metadata(maps:get(metadata, E, #{}))
    }.

action(undefined) ->
    null;
action(unset_timer) ->
    <<"unset_timer">>;
action(#{set_timer := At} = A) ->
    #{<<"set_timer">> => docket_progressor_json:to_rfc3339(At), <<"remove">> => maps:get(remove, A, false)};
%% progressor removes at once on #{remove := true} without a time.
action(#{remove := true}) ->
    #{<<"timeout">> => <<"0s">>, <<"remove">> => true}.

%% As progressor's prg_utils:format/1 prints a reason for a process's detail.
error_text(T) ->
    unicode:characters_to_binary(io_lib:format("~64000p", [T])).
